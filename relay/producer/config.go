package producer

import (
	"fmt"

	"github.com/kvrouter/kvrouter/relay/filter"
)

// Defaults of Config. Each comment says why the value is what it is.
const (
	// DefaultQueueLen is the per-subscriber queue in updates. At one delta
	// per source batch and a heartbeat a second, 256 updates absorb a burst
	// of a quarter second at 1,000 batches/s before a slow subscriber is
	// cut; a cut costs that subscriber one snapshot, never the others.
	DefaultQueueLen = 256
	// DefaultMaxDeltaBytes caps one encoded delta at 1 MiB, a quarter of
	// gRPC's default 4 MiB message limit: a publication that changes more
	// buckets (about 87,000) is cheaper to resend as a snapshot.
	DefaultMaxDeltaBytes = 1 << 20
	// DefaultGrowLoad is the load factor above which the producer rebuilds
	// into a filter twice as large. Inserts start failing near 95%; 0.92
	// rebuilds before omissions become likely.
	DefaultGrowLoad = 0.92
	// DefaultBloomRebuildShare is the share of a Bloom summary's entries
	// that may be removed blocks (set bits the filter cannot clear) before
	// the producer rebuilds it from the exact set. A removed block reads
	// as present for certain, and it is one requests may well ask for
	// again; at 0.25 at most a quarter of what the filter claims is gone,
	// and a pool whose blocks turn over once a minute is re-sent as a
	// snapshot about every 20 seconds. A lower share costs more snapshots,
	// a higher one more wrongly claimed prefixes (bloom.go).
	DefaultBloomRebuildShare = 0.25
)

// Config configures a Producer. Filter sizes the summary; the zero value
// of every other field takes its default.
type Config struct {
	// Filter selects and sizes the summary: filter.KindCuckoo (or zero),
	// filter.KindCuckooCompact or filter.KindBloom.
	Filter filter.Config
	// QueueLen is each subscriber's queue length in updates.
	QueueLen int
	// MaxDeltaBytes caps an encoded delta; larger publications end every
	// feed with ErrResync.
	MaxDeltaBytes int
	// GrowLoad is the load factor that triggers a rebuild at twice the
	// capacity (which changes the epoch). 1 or more disables growth. A
	// Bloom summary's load counts its stale entries too.
	GrowLoad float64
	// BloomRebuildShare is the share of a Bloom summary's entries that
	// may be stale (removed from the pool, still set in the filter)
	// before it is rebuilt from the exact set (0 < share < 1).
	BloomRebuildShare float64
}

// EnsureDefaults fills every zero field with its default.
func (c *Config) EnsureDefaults() {
	c.Filter.EnsureDefaults()
	if c.QueueLen == 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.MaxDeltaBytes == 0 {
		c.MaxDeltaBytes = DefaultMaxDeltaBytes
	}
	if c.GrowLoad == 0 {
		c.GrowLoad = DefaultGrowLoad
	}
	if c.BloomRebuildShare == 0 {
		c.BloomRebuildShare = DefaultBloomRebuildShare
	}
}

// Validate reports the first invalid field, wrapped in ErrConfig.
func (c Config) Validate() error {
	if err := c.Filter.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case c.QueueLen < 1:
		return fmt.Errorf("%w: queue length %d", ErrConfig, c.QueueLen)
	case c.MaxDeltaBytes < 1024:
		return fmt.Errorf("%w: max delta bytes %d below 1024", ErrConfig, c.MaxDeltaBytes)
	case c.GrowLoad <= 0.5:
		return fmt.Errorf("%w: grow load %v at or below 0.5", ErrConfig, c.GrowLoad)
	case !(c.BloomRebuildShare > 0 && c.BloomRebuildShare < 1):
		return fmt.Errorf("%w: bloom rebuild share %v outside (0, 1)", ErrConfig, c.BloomRebuildShare)
	}
	return nil
}
