package consumer

import (
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
)

// Defaults of Config. Each comment says why the value is what it is.
const (
	// DefaultVerifyWindow re-tests the 2 positions below a found depth,
	// the reference router's later value: with 16-bit fingerprints a
	// false-positive run of 2 unprobed blocks has probability ~1e-8.
	DefaultVerifyWindow = 2
	// MaxVerifyWindow bounds the window; past 8 a linear scan is cheaper.
	MaxVerifyWindow = 8
	// DefaultBackoffBase is the first retry delay after an error: 100 ms is
	// below one WAN round trip's worth of lost freshness.
	DefaultBackoffBase = 100 * time.Millisecond
	// DefaultBackoffMax caps the delay at 2 s so that a lane whose peer
	// relay returns (a restart, a rolling upgrade) is live again within
	// about 2 s: with a 10 s cap a peer down for a few seconds left the
	// lane waiting up to 10 s more, and cross-DC routing stayed off for
	// 9.7 s after a relay restart (chaos S07). A subscription attempt to a
	// dead peer every 1–2 s is one failed dial per lane.
	DefaultBackoffMax = 2 * time.Second
	// DefaultSubscriberID names subscribers that did not set one.
	DefaultSubscriberID = "kvrouter-relay"
)

// Config configures a Consumer.
type Config struct {
	// SubscriberID names this consumer in the publishers' logs.
	SubscriberID string
	// VerifyWindow is the number of positions re-tested below a depth.
	VerifyWindow int
	// BackoffBase and BackoffMax bound the exponential retry delay; each
	// delay is drawn uniformly from [d/2, d) to spread reconnections.
	BackoffBase, BackoffMax time.Duration
	// MaxSnapshotBytes bounds an accepted snapshot (0: the publish default).
	MaxSnapshotBytes uint64
	// Seed seeds each lane's backoff jitter (lane i uses Seed + i).
	Seed uint64
	// Now is the clock that stamps received messages, from which staleness
	// is measured. Required: the process passes time.Now, tests a fake.
	Now func() time.Time
	// Observe, if set, is called by a lane's goroutine after each event is
	// applied, with the clock reading that stamped it. It must not block.
	Observe func(pool producer.PoolID, ev publish.Event, at time.Time)
}

// EnsureDefaults fills every zero field except Now and Observe.
func (c *Config) EnsureDefaults() {
	if c.SubscriberID == "" {
		c.SubscriberID = DefaultSubscriberID
	}
	if c.VerifyWindow == 0 {
		c.VerifyWindow = DefaultVerifyWindow
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
}

// Validate reports the first invalid field, wrapped in ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.Now == nil:
		return fmt.Errorf("%w: no clock", ErrConfig)
	case c.VerifyWindow < 1 || c.VerifyWindow > MaxVerifyWindow:
		return fmt.Errorf("%w: verify window %d outside 1..%d", ErrConfig, c.VerifyWindow, MaxVerifyWindow)
	case c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("%w: backoff %v..%v", ErrConfig, c.BackoffBase, c.BackoffMax)
	}
	return nil
}
