package fleet

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// ErrConfig is returned for an invalid Config; the message names the key.
var ErrConfig = errors.New("fleet: invalid config")

// Defaults of Config. Engines heartbeat every DefaultHeartbeatInterval.
const (
	// DefaultHeartbeatInterval is the engines' heartbeat period the other
	// defaults are derived from; the plane itself never sends heartbeats.
	DefaultHeartbeatInterval = 500 * time.Millisecond
	// DefaultLivenessTimeout is six heartbeat periods: long enough to ride
	// out a GC pause, a lost heartbeat or a NATS client reconnect (whose
	// default wait is 2 s), short enough that a dead engine stops receiving
	// new requests within a few seconds.
	DefaultLivenessTimeout = 3 * time.Second
	// DefaultSweepInterval is how often expired engines are looked for; a
	// dead engine is therefore removed within LivenessTimeout+SweepInterval.
	DefaultSweepInterval = 250 * time.Millisecond
	// DefaultSnapshotTimeout bounds one snapshot request: an engine dumps a
	// few hundred thousand blocks in well under a second.
	DefaultSnapshotTimeout = 2 * time.Second
	// DefaultSnapshotAttempts bounds the requests of one resync, so that an
	// engine that cannot answer costs at most attempts*timeout plus backoff
	// before the rank is left for the next gap or heartbeat to retry.
	DefaultSnapshotAttempts = 3
	// DefaultSnapshotBackoff is the wait after the first failed attempt; it
	// doubles after each further failure.
	DefaultSnapshotBackoff = 200 * time.Millisecond
	// DefaultMaxBufferedEvents bounds the live events kept per rank while
	// its resync is in flight: several seconds of a busy engine's events.
	// Beyond it the buffer is dropped and the gap it leaves triggers the
	// next resync once the current one completes.
	DefaultMaxBufferedEvents = 1 << 16
	// DefaultQueueLength is the capacity of the queue between the NATS
	// callbacks and the applier; when full, the callbacks block, which
	// pushes back into the NATS client's pending buffer.
	DefaultQueueLength = 1024
	// DefaultDiscoverWait is how long after asking every engine for its
	// card (kvr.<dc>.discover) the registry counts as complete: two
	// heartbeat periods, ample for engines that answer within a round
	// trip, and it also covers engines that only heartbeat.
	DefaultDiscoverWait = 2 * DefaultHeartbeatInterval
	// DefaultMaxEngines bounds the registry: several times the largest
	// fleet one DC's router cluster is sized for, and small enough that a
	// flood of forged cards costs a bounded amount of memory and routing
	// work.
	DefaultMaxEngines = 4096
	// DefaultRegistrationRate is how many cards per second may add, restart
	// or update an engine once the burst is spent: a fleet of
	// DefaultMaxEngines registers within ninety seconds, while a flood of
	// forged cards adds at most this many engines (each of which costs a
	// snapshot request and, when it expires, an index removal).
	DefaultRegistrationRate = 50
	// DefaultRegistrationBurst lets a fleet of this many engines that
	// starts (or restarts) at once register without waiting.
	DefaultRegistrationBurst = 512
)

// Config shapes a Plane. Zero fields take the defaults; call
// EnsureDefaults then Validate (New does both).
type Config struct {
	// DC is the data-centre name in the subjects kvr.<dc>.…; required.
	DC string
	// NoKVEvents is the approximate mode: KV events are not subscribed to
	// and no snapshots are requested; the registry still runs.
	NoKVEvents bool
	// LivenessTimeout is how long an engine may go without a heartbeat or
	// card before it is removed.
	LivenessTimeout time.Duration
	// SweepInterval is the period of the liveness sweep.
	SweepInterval time.Duration
	// SnapshotTimeout bounds one snapshot request.
	SnapshotTimeout time.Duration
	// SnapshotAttempts is the number of requests per resync.
	SnapshotAttempts int
	// SnapshotBackoff is the wait after the first failed attempt.
	SnapshotBackoff time.Duration
	// MaxBufferedEvents bounds the live events buffered per rank during a
	// resync.
	MaxBufferedEvents int
	// QueueLength is the applier queue capacity.
	QueueLength int
	// DiscoverWait is how long after Start the registry is taken to know
	// every engine (see Plane.Discovered).
	DiscoverWait time.Duration
	// MaxEngines bounds the engines registered; a new engine's own card
	// beyond it is refused (declared engines are always admitted).
	MaxEngines int
	// RegistrationRate (per second) and RegistrationBurst bound the
	// engines' own cards that add, restart or update an engine; a card
	// that only refreshes liveness is never limited.
	RegistrationRate  float64
	RegistrationBurst int
	// RefuseV1Subjects stops the plane from also listening on protocol
	// version 1's shared worker subjects (kvr.<dc>.workers.register, …),
	// where engines of the previous release publish. Leave it false until
	// every engine is upgraded (docs/operations.md, "Rolling upgrade").
	RefuseV1Subjects bool
	// Now is the clock; nil means time.Now. Tests inject their own.
	Now func() time.Time
}

// EnsureDefaults replaces zero fields with their defaults and returns the
// config for chaining.
func (c *Config) EnsureDefaults() *Config {
	setDur(&c.LivenessTimeout, DefaultLivenessTimeout)
	setDur(&c.SweepInterval, DefaultSweepInterval)
	setDur(&c.DiscoverWait, DefaultDiscoverWait)
	setDur(&c.SnapshotTimeout, DefaultSnapshotTimeout)
	setDur(&c.SnapshotBackoff, DefaultSnapshotBackoff)
	setInt(&c.SnapshotAttempts, DefaultSnapshotAttempts)
	setInt(&c.MaxBufferedEvents, DefaultMaxBufferedEvents)
	setInt(&c.QueueLength, DefaultQueueLength)
	setInt(&c.MaxEngines, DefaultMaxEngines)
	setInt(&c.RegistrationBurst, DefaultRegistrationBurst)
	if c.RegistrationRate == 0 {
		c.RegistrationRate = DefaultRegistrationRate
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func setDur(v *time.Duration, d time.Duration) {
	if *v == 0 {
		*v = d
	}
}

func setInt(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

// Validate checks the config; the error names the first bad key.
func (c *Config) Validate() error {
	if err := kvrpb.ValidDC(c.DC); err != nil {
		return fmt.Errorf("%w: dc: %w", ErrConfig, err)
	}
	switch {
	case c.LivenessTimeout <= 0:
		return fmt.Errorf("%w: liveness_timeout %v must be positive", ErrConfig, c.LivenessTimeout)
	case c.SweepInterval <= 0 || c.SweepInterval > c.LivenessTimeout:
		return fmt.Errorf("%w: sweep_interval %v must be in (0, liveness_timeout]", ErrConfig, c.SweepInterval)
	case c.SnapshotTimeout <= 0:
		return fmt.Errorf("%w: snapshot_timeout %v must be positive", ErrConfig, c.SnapshotTimeout)
	case c.SnapshotAttempts < 1 || c.SnapshotAttempts > 100:
		return fmt.Errorf("%w: snapshot_attempts %d not in 1..100", ErrConfig, c.SnapshotAttempts)
	case c.SnapshotBackoff < 0:
		return fmt.Errorf("%w: snapshot_backoff %v must not be negative", ErrConfig, c.SnapshotBackoff)
	case c.MaxBufferedEvents < 1:
		return fmt.Errorf("%w: max_buffered_events %d must be positive", ErrConfig, c.MaxBufferedEvents)
	case c.QueueLength < 1:
		return fmt.Errorf("%w: queue_length %d must be positive", ErrConfig, c.QueueLength)
	case c.MaxEngines < 1:
		return fmt.Errorf("%w: max_engines %d must be positive", ErrConfig, c.MaxEngines)
	case c.RegistrationRate <= 0:
		return fmt.Errorf("%w: engine_registration_rate %v must be positive", ErrConfig, c.RegistrationRate)
	case c.RegistrationBurst < 1:
		return fmt.Errorf("%w: engine_registration_burst %d must be positive", ErrConfig, c.RegistrationBurst)
	}
	return nil
}
