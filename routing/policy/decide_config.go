package policy

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
)

// TextBytesPerToken converts a text prompt's length to an estimated token
// count. Four bytes per token is the usual BPE ratio for English and the
// ratio of the mocker's pseudo tokens.
const TextBytesPerToken = 4

// textTokensPerChunk is the token length a text chunk stands for, used to
// convert a text overlap in chunks to blocks of the workers' block size.
const textTokensPerChunk = routing.DefaultTextBlockBytes / TextBytesPerToken

// Defaults of DeciderConfig.
const (
	// DefaultSuspectTimeout is how long an engine that a request could not
	// reach is left out: the event plane's default liveness timeout (3 s),
	// by which a dead engine has been dropped and a live one has had time
	// to come back.
	DefaultSuspectTimeout = 3 * time.Second
	// DefaultExpireInterval is how often, at most, the load trackers are
	// swept for requests whose end never arrived. The reference sweeps
	// every 60 s; the sweep scans every active request.
	DefaultExpireInterval = 60 * time.Second
)

// randStream is the PCG stream of the selectors' generator ("dispatch"),
// so that DeciderConfig.Seed alone fixes the sequence.
const randStream = 0x6469737061746368

// DeciderConfig configures a Decider. The router node builds it from its
// configuration and the simulator from its own; a field means the same in
// both. Zero values are documented per field.
type DeciderConfig struct {
	// Policy names the selector (see New) and Options configure it; the
	// generator of Options is ignored: the Decider seeds its own from Seed.
	Policy  string
	Options Options
	Seed    uint64
	// Thresholds are the busy thresholds of the pipeline and of soft
	// session affinity.
	Thresholds Thresholds
	// BlockSize is the KV block size in tokens; 0 takes it from the first
	// rank of the request's model, and ranks that differ are not
	// candidates.
	BlockSize int
	// ApproximateMode matches every prompt in the Decider's own
	// approximate index (ApproxTTL; 0: index.DefaultTTL), which learns
	// from its decisions, instead of the exact index.
	ApproximateMode bool
	ApproxTTL       time.Duration
	// ApproxPolicy is how the approximate index of approximate mode
	// forgets: index.PolicyTTL (the zero value) after ApproxTTL, or
	// index.PolicyLRU by modelling each rank's cache at its advertised
	// capacity (WorkerInfo.TotalBlocks), keeping the blocks of active
	// requests (decide_approx.go). LRU needs ApproximateMode.
	ApproxPolicy index.Policy
	// PredictTTL, when positive, records every decision in the
	// predict-on-route side index, merged with the exact index's matches
	// until the engine's events catch up.
	PredictTTL time.Duration
	// MaxRequestAge frees a booking whose end never arrived (0: never);
	// the sweep runs at most once per ExpireInterval of the clock (default
	// DefaultExpireInterval).
	MaxRequestAge  time.Duration
	ExpireInterval time.Duration
	// Tracking switches the load trackers' toggles (decide_tracking.go).
	Tracking Tracking
	// SuspectTimeout is how long an engine a request could not reach is
	// left out of the candidates. Default DefaultSuspectTimeout.
	SuspectTimeout time.Duration
	// Bindings is the session store; nil turns session affinity off.
	// AffinityMode and MaxSessions say how bindings are followed and how
	// many new sessions are admitted.
	Bindings     Bindings
	AffinityMode AffinityMode
	MaxSessions  int
	// Reports, when set, is the load each rank last reported itself.
	Reports LoadReporter
	// Now is the clock of binding deadlines and suspicions; required.
	Now func() time.Time
	// Observer receives session and suspicion events; nil: none. Log gets
	// the warnings of failures that cost only future quality; nil: none.
	Observer Observer
	Log      *slog.Logger
}

// LoadReporter is the load each rank last reported (in its heartbeat). A
// router's own bookings miss requests routed by other routers, so the
// projection adds, per field, how much the report exceeds the booked
// active load. A rank with no report counts only what was booked.
type LoadReporter interface {
	Load(w routing.Worker) (routing.Load, bool)
}

// AffinityEvent names a session event for the metrics.
type AffinityEvent string

// Session events.
const (
	AffinityBind       AffinityEvent = "bind"       // a first successful request bound its session
	AffinityHit        AffinityEvent = "hit"        // a binding decided the engine
	AffinityRebind     AffinityEvent = "rebind"     // a soft binding moved to another engine
	AffinityInvalidate AffinityEvent = "invalidate" // a binding was dropped: engine gone or failed
	AffinityExpire     AffinityEvent = "expire"     // an idle binding timed out
	AffinityUnbind     AffinityEvent = "unbind"     // explicit unbind or a final request
	AffinityConflict   AffinityEvent = "conflict"   // a concurrent request bound the session first
	AffinityLimit      AffinityEvent = "limit"      // a new session was refused at the bound
)

// AffinityEvents lists every session event, for metric registration.
var AffinityEvents = []AffinityEvent{AffinityBind, AffinityHit, AffinityRebind, AffinityInvalidate,
	AffinityExpire, AffinityUnbind, AffinityConflict, AffinityLimit}

// Observer receives the Decider's events. It is called from request
// goroutines and must be safe for concurrent use.
type Observer interface {
	// Affinity counts n session events of one kind.
	Affinity(ev AffinityEvent, n int)
	// Unreachable counts an engine made a suspect.
	Unreachable(id routing.WorkerID)
}

// noObserver is the Observer of a Decider built without one.
type noObserver struct{}

func (noObserver) Affinity(AffinityEvent, int)     {}
func (noObserver) Unreachable(id routing.WorkerID) {}

// withDefaults fills the optional fields.
func (c DeciderConfig) withDefaults() DeciderConfig {
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.ExpireInterval <= 0 {
		c.ExpireInterval = DefaultExpireInterval
	}
	c.SuspectTimeout = cmp.Or(c.SuspectTimeout, DefaultSuspectTimeout)
	return c
}

// validate checks what the Decider's parts do not check themselves.
func (c DeciderConfig) validate() error {
	switch {
	case c.Now == nil:
		return configError("now: a clock is required")
	case c.BlockSize < 0:
		return configError("block_size: must be >= 0, got %d", c.BlockSize)
	case c.SuspectTimeout < 0:
		return configError("suspect_timeout: must be >= 0, got %v", c.SuspectTimeout)
	case c.Bindings != nil && c.MaxSessions <= 0:
		return configError("max_sessions: must be > 0, got %d", c.MaxSessions)
	case c.AffinityMode != AffinityHard && c.AffinityMode != AffinitySoft:
		return configError("affinity_mode: must be hard or soft, got %d", c.AffinityMode)
	case c.ApproxPolicy == index.PolicyLRU && !c.ApproximateMode:
		return configError("approx_policy: lru models the caches of approximate mode; with KV events on it has no effect")
	}
	return c.Tracking.validate()
}

// trackerConfig is the load tracker configuration of a block size.
func (c DeciderConfig) trackerConfig(blockSize int) load.Config {
	t := c.Tracking.apply(load.DefaultConfig(blockSize))
	t.MaxRequestAge = c.MaxRequestAge
	return t
}
