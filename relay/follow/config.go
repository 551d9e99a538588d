package follow

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
)

// Defaults of Config.
const (
	// DefaultMinBackoff is the first wait after a failed connection: long
	// enough not to spin on a node that refuses, short against the
	// summary staleness budget of 2 s.
	DefaultMinBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff caps the doubling: a relay whose DC cluster is down
	// still notices its return within 2 s.
	DefaultMaxBackoff = 2 * time.Second
	// DefaultMaxMessageBytes is the receive limit: a batch is at most one
	// raft entry's blocks, each named at most twice (consensus.
	// WatchChunkHashes explains the bound), so 16 MiB covers a 2 MiB
	// command with room to spare.
	DefaultMaxMessageBytes = 16 << 20
)

// Sentinel errors of the package.
var (
	// ErrConfig is returned by New for a Config that fails validation.
	ErrConfig = errors.New("follow: invalid config")
	// ErrClosed is returned by Next after Close.
	ErrClosed = errors.New("follow: closed")
	// ErrGap marks a stream that broke the ordering contract (a batch
	// whose prev_index is above the last delivered index, an index that
	// does not increase, a malformed snapshot); the stream is dropped and
	// resumed, and Stats.Gaps counts it.
	ErrGap = errors.New("follow: ownership stream out of order")
)

// Config configures a Source.
type Config struct {
	// Addrs are the gRPC targets of the DC's router nodes' cluster API
	// servers; Source uses one at a time and moves to the next on failure.
	Addrs []string
	// DialOptions are passed to grpc.NewClient; they must include
	// transport credentials (insecure.NewCredentials() on a DC network).
	DialOptions []grpc.DialOption
	// MinBackoff and MaxBackoff bound the wait between failed attempts; it
	// doubles from MinBackoff and resets once a message arrives.
	MinBackoff, MaxBackoff time.Duration
	// MaxMessageBytes is the stream's receive limit.
	MaxMessageBytes int
	// Logger receives reconnects and resyncs; default discards.
	Logger *slog.Logger
}

// EnsureDefaults fills every zero field with its default.
func (c *Config) EnsureDefaults() {
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports the first invalid field, wrapped in ErrConfig.
func (c Config) Validate() error {
	switch {
	case len(c.Addrs) == 0:
		return fmt.Errorf("%w: no router node address", ErrConfig)
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("%w: backoff %v..%v", ErrConfig, c.MinBackoff, c.MaxBackoff)
	case c.MaxMessageBytes < 1<<20:
		return fmt.Errorf("%w: max message bytes %d below 1 MiB", ErrConfig, c.MaxMessageBytes)
	}
	for i, a := range c.Addrs {
		if a == "" {
			return fmt.Errorf("%w: address %d is empty", ErrConfig, i)
		}
	}
	return nil
}
