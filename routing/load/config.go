package load

import (
	"fmt"
	"math"
	"time"
)

// DefaultMaxRequestAge is the request-liveness safety timeout. A request
// whose completion never reaches the router (a lost Free) would otherwise be
// phantom load forever; five minutes is longer than any normal generation
// and matches the reference router's default of 300 seconds.
const DefaultMaxRequestAge = 300 * time.Second

// Config configures a Tracker. Start from DefaultConfig: the zero value
// turns every tracking toggle off.
type Config struct {
	// BlockSize is the engines' KV block size in tokens. It must match the
	// block size the request hashes were computed with; there is no safe
	// default, so DefaultConfig takes it as an argument.
	BlockSize int
	// TrackPrefillTokens counts uncached prompt tokens as active prefill
	// load until the request's first output token. Default on. Off, active
	// prefill is always zero (a disaggregated decode stage does no prefill).
	TrackPrefillTokens bool
	// TrackActiveBlocks counts the KV blocks of active requests as decode
	// load. Default on. Off, every decode-block figure is zero: a
	// disaggregated prefill stage holds a request's blocks only until it
	// hands them off, and does no decode (track_active_blocks off).
	TrackActiveBlocks bool
	// AssumeKVReuse de-duplicates identical prompt blocks of active requests
	// on one worker, because the engine's prefix cache shares them. Default
	// on. Off, every request's blocks count in full (used where blocks are
	// not shared, e.g. a disaggregated decode stage).
	AssumeKVReuse bool
	// TrackOutputBlocks adds one private block each time a request's
	// generated tokens cross a block boundary (AddOutputTokens). Default off:
	// it is experimental in the reference router, and decode growth is
	// usually small next to prompt blocks.
	TrackOutputBlocks bool
	// OutputDecay is how fast, with TrackOutputBlocks, a request's output
	// blocks lose weight as it nears its expected output length
	// (Request.OutputTokens, the client's osl hint): their weight is
	// max(0, 1 - OutputDecay*generated/expected). Default 1, the
	// reference's decay: the weight falls linearly to zero at the expected
	// length, so a request about to finish weighs little. 0 keeps full
	// weight until the request ends. A request without an expected length
	// always weighs in full.
	OutputDecay float64
	// MaxRequestAge is the age, measured from Add, after which Expire frees
	// a request. Zero disables expiry. Default DefaultMaxRequestAge.
	MaxRequestAge time.Duration
}

// DefaultOutputDecay is the reference router's decay of output weight: to
// zero at the expected output length.
const DefaultOutputDecay = 1

// DefaultConfig returns the reference router's defaults for the given block
// size: active-block and prefill tracking and KV-reuse de-duplication on,
// output-block tracking off (with the reference's output decay when it is
// turned on), expiry after 300 s.
func DefaultConfig(blockSize int) Config {
	return Config{
		BlockSize:          blockSize,
		TrackActiveBlocks:  true,
		TrackPrefillTokens: true,
		AssumeKVReuse:      true,
		OutputDecay:        DefaultOutputDecay,
		MaxRequestAge:      DefaultMaxRequestAge,
	}
}

// Validate reports the first invalid field, naming its configuration key.
func (c Config) Validate() error {
	if c.BlockSize <= 0 {
		return fmt.Errorf("%w: block_size must be > 0, got %d", ErrInvalidConfig, c.BlockSize)
	}
	if c.MaxRequestAge < 0 {
		return fmt.Errorf("%w: active_request_expiry must be >= 0, got %v", ErrInvalidConfig, c.MaxRequestAge)
	}
	if !(c.OutputDecay >= 0) || math.IsInf(c.OutputDecay, 1) {
		return fmt.Errorf("%w: output_block_decay must be >= 0 and finite, got %v", ErrInvalidConfig, c.OutputDecay)
	}
	return nil
}
