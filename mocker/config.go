package mocker

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"
)

// Default engine shape for the reference pair (Llama-3.1-8B-Instruct, bf16,
// one H100-80GB SXM, vLLM); doc.go derives every figure.
const (
	// DefaultModel is the served model name advertised in WorkerInfo.
	DefaultModel = "meta-llama/Llama-3.1-8B-Instruct"
	// DefaultBlockSize is the KV block size in tokens. 64 keeps the block
	// tables of 190k-token prompts under 3,000 entries.
	DefaultBlockSize = 64
	// DefaultNumBlocks is the device KV capacity: about 60 GB left for KV
	// after weights and activations, at 128 KiB per token, is 457,763
	// tokens, rounded down to whole 64-token blocks.
	DefaultNumBlocks = 7152
	// DefaultMaxNumBatchedTokens is vLLM's max_num_batched_tokens with
	// chunked prefill on an H100.
	DefaultMaxNumBatchedTokens = 8192
	// DefaultMaxNumSeqs is vLLM's max_num_seqs.
	DefaultMaxNumSeqs = 256
	// DefaultEventRingSize is how many recent KV events an engine keeps for
	// resynchronisation, as the worker-local indexer buffer of the reference
	// router.
	DefaultEventRingSize = 1024
	// MaxEventRingSize bounds EventRingSize, whose ring is allocated up
	// front: a million events is far more than any gap repair needs.
	MaxEventRingSize = 1 << 20
)

// ErrConfig is returned for an invalid Config; the message names the field.
var ErrConfig = errors.New("mocker: invalid config")

// Config shapes one simulated engine. The zero value of every field means
// "use the default"; call EnsureDefaults then Validate (New does both).
type Config struct {
	// Model is the served model name advertised to the router.
	Model string
	// BlockSize is the KV block size in tokens; prompts are hashed in
	// blocks of this size.
	BlockSize int
	// NumBlocks is the device KV capacity in blocks.
	NumBlocks int
	// MaxNumBatchedTokens caps the tokens one iteration processes (decode
	// tokens plus prefill chunk tokens), as vLLM's max_num_batched_tokens.
	MaxNumBatchedTokens int
	// MaxNumSeqs caps the number of running requests, as vLLM's max_num_seqs.
	MaxNumSeqs int
	// EventRingSize is the number of recent events kept for EventsSince.
	EventRingSize int
	// MaxModelLen, when positive, rejects requests whose prompt plus
	// MaxTokens exceeds it. Zero means only the KV capacity limits length,
	// so that traces longer than the model's real context still replay.
	MaxModelLen int
	// SpeedUp divides every iteration time; a process-mode engine uses it
	// to run a trace faster than real time. Zero means 1.
	SpeedUp float64
	// Timing is the iteration cost model; zero fields take the defaults.
	Timing Timing
}

// EnsureDefaults replaces every zero field with its default and returns the
// config for chaining.
func (c *Config) EnsureDefaults() *Config {
	c.Model = cmp.Or(c.Model, DefaultModel)
	c.BlockSize = cmp.Or(c.BlockSize, DefaultBlockSize)
	c.NumBlocks = cmp.Or(c.NumBlocks, DefaultNumBlocks)
	c.MaxNumBatchedTokens = cmp.Or(c.MaxNumBatchedTokens, DefaultMaxNumBatchedTokens)
	c.MaxNumSeqs = cmp.Or(c.MaxNumSeqs, DefaultMaxNumSeqs)
	c.EventRingSize = cmp.Or(c.EventRingSize, DefaultEventRingSize)
	c.SpeedUp = cmp.Or(c.SpeedUp, 1)
	c.Timing.ensureDefaults()
	return c
}

// Validate checks every field and names the first bad one.
func (c *Config) Validate() error {
	ints := []struct {
		name string
		v    int
	}{
		{"BlockSize", c.BlockSize},
		{"NumBlocks", c.NumBlocks},
		{"MaxNumBatchedTokens", c.MaxNumBatchedTokens},
		{"MaxNumSeqs", c.MaxNumSeqs},
		{"EventRingSize", c.EventRingSize},
	}
	for _, f := range ints {
		if f.v <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %d", ErrConfig, f.name, f.v)
		}
	}
	if c.EventRingSize > MaxEventRingSize {
		return fmt.Errorf("%w: EventRingSize must be at most %d, got %d", ErrConfig, MaxEventRingSize, c.EventRingSize)
	}
	if c.MaxModelLen < 0 {
		return fmt.Errorf("%w: MaxModelLen must not be negative, got %d", ErrConfig, c.MaxModelLen)
	}
	if !(c.SpeedUp > 0) || math.IsInf(c.SpeedUp, 0) {
		return fmt.Errorf("%w: SpeedUp must be positive and finite, got %v", ErrConfig, c.SpeedUp)
	}
	return c.Timing.validate()
}

// Timing is the iteration cost model (see doc.go for the derivation):
//
//	t = IterationOverhead
//	  + max(WeightRead, (prefill tokens + decodes) * TokenNanos)
//	  + attention pairs of the prefill chunks * AttentionPairNanos
//	  + decode context tokens * KVReadNanos
//
// then divided by Config.SpeedUp. Every term is non-decreasing in every
// input, so a bigger batch is never faster. A zero field takes its default;
// a term is neutralised with a tiny positive value instead.
type Timing struct {
	// IterationOverhead is the fixed cost of one engine step (scheduling,
	// sampling, kernel launches).
	IterationOverhead time.Duration
	// WeightRead is the time to stream the weights once from HBM, the floor
	// of any step that is not compute bound.
	WeightRead time.Duration
	// TokenNanos is the dense (non-attention) compute per processed token.
	TokenNanos float64
	// AttentionPairNanos is the attention compute per (query, key) pair in a
	// prefill chunk.
	AttentionPairNanos float64
	// KVReadNanos is the HBM time to read one context token's KV in decode.
	KVReadNanos float64
	// KVTransferNanos is the network time to move one prompt token's KV
	// cache from a prefill engine to a decode engine, and KVTransferLatency
	// the fixed cost of one transfer (the connectors' metadata exchange and
	// the first read's round trip); see transfer.go.
	KVTransferNanos   float64
	KVTransferLatency time.Duration
}

// Default timing constants for the reference pair; doc.go derives them.
const (
	DefaultIterationOverhead  = 1500 * time.Microsecond
	DefaultWeightRead         = 6 * time.Millisecond
	DefaultTokenNanos         = 36000
	DefaultAttentionPairNanos = 1.2
	DefaultKVReadNanos        = 48
	// DefaultKVTransferNanos: 128 KiB of KV per token over one 400 Gb/s
	// RDMA link at ~80% of its 50 GB/s, 40 GB/s, is 3.3 µs per token: a
	// 16k-token prompt moves in about 54 ms, a tenth of its prefill.
	DefaultKVTransferNanos = 3277
	// DefaultKVTransferLatency is a millisecond: NIXL's metadata exchange
	// and the first remote read, as measured in the low milliseconds.
	DefaultKVTransferLatency = time.Millisecond
)

func (t *Timing) ensureDefaults() {
	t.IterationOverhead = cmp.Or(t.IterationOverhead, DefaultIterationOverhead)
	t.WeightRead = cmp.Or(t.WeightRead, DefaultWeightRead)
	t.TokenNanos = cmp.Or(t.TokenNanos, DefaultTokenNanos)
	t.AttentionPairNanos = cmp.Or(t.AttentionPairNanos, DefaultAttentionPairNanos)
	t.KVReadNanos = cmp.Or(t.KVReadNanos, DefaultKVReadNanos)
	t.KVTransferNanos = cmp.Or(t.KVTransferNanos, DefaultKVTransferNanos)
	t.KVTransferLatency = cmp.Or(t.KVTransferLatency, DefaultKVTransferLatency)
}

func (t *Timing) validate() error {
	durations := []struct {
		name string
		d    time.Duration
	}{{"IterationOverhead", t.IterationOverhead}, {"WeightRead", t.WeightRead}, {"KVTransferLatency", t.KVTransferLatency}}
	for _, f := range durations {
		if f.d < 0 {
			return fmt.Errorf("%w: Timing.%s must not be negative", ErrConfig, f.name)
		}
	}
	floats := []struct {
		name string
		v    float64
	}{
		{"Timing.TokenNanos", t.TokenNanos},
		{"Timing.AttentionPairNanos", t.AttentionPairNanos},
		{"Timing.KVReadNanos", t.KVReadNanos},
		{"Timing.KVTransferNanos", t.KVTransferNanos},
	}
	for _, f := range floats {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%w: %s must be finite and not negative, got %v", ErrConfig, f.name, f.v)
		}
	}
	return nil
}
