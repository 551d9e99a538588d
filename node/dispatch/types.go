package dispatch

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// AffinityMode says how strictly a session sticks to its bound engine;
// see policy.AffinityMode.
type AffinityMode = policy.AffinityMode

// The affinity modes.
const (
	AffinityHard = policy.AffinityHard
	AffinitySoft = policy.AffinitySoft
)

// Binding is a session's engine; see routing.Binding.
type Binding = routing.Binding

// Bindings is the session store, whose contract policy.Bindings states:
// policy.MemBindings for one node, the DC's Raft-replicated store for a cluster.
type Bindings = policy.Bindings

// Authoritative marks a session store that binds before dispatch; see
// policy.Authoritative.
type Authoritative = policy.Authoritative

// Request is what the HTTP frontend knows of a client request when it asks
// for an engine. Exactly one of Tokens and Text carries the prompt: token
// ids when the client sent them, otherwise the prompt text (chat messages
// serialised), which is routed with text-chunk hashing.
type Request struct {
	// ID is the request id (X-Request-Id or generated); unique while active.
	ID string
	// Model is the requested model name.
	Model string
	// Tokens are the prompt's token ids, when known. They are lent for the
	// Route call only: a Router must not keep them (or the Request) after
	// Route returns, because the frontend recycles their memory for the
	// next request once this one is finished.
	Tokens []uint32
	// Text is the prompt text, used when Tokens is nil.
	Text string
	// LoRA and CacheSalt fold into the block hash seed.
	LoRA, CacheSalt string
	// SessionID and ParentSessionID come from the session headers; empty
	// means no affinity.
	SessionID, ParentSessionID string
	// SessionFinal ends the session after this request.
	SessionFinal bool
	// Pin optionally names the exact engine (and rank) to use: with
	// disaggregated serving, the decode engine.
	Pin *Pin
	// PrefillPin optionally names the prefill engine (and rank) of a
	// disaggregated request; a request served whole ignores it.
	PrefillPin *Pin
	// Subset, when not nil, restricts the choice to the engines whose
	// endpoint (HostPort of their URL) it lists: a gateway's subset hint.
	// With disaggregated serving it restricts the decode engine, and the
	// prefill engine only when it lists one of the model's prefill
	// engines (policy.Disagg). Empty allows none: ErrNoEngine.
	Subset []string
	// MaxTokens is the requested output length, 0 when unknown.
	MaxTokens int
	// Arrival is when the frontend received the request.
	Arrival time.Time
	// PolicyClass is the policy class or family the client asked for
	// (x-dynamo-meta-policy-class); "" for the default family.
	PolicyClass string
	// Priority is nvext.agent_hints.priority, in [0, MaxPriority]: seconds
	// of arrival credit under fcfs, a weight under wspt. StrictPriority is
	// the strict tier; a higher tier is always served first.
	Priority       float64
	StrictPriority int
	// OutputTokens is the expected output length in tokens
	// (nvext.agent_hints.osl), 0 when unknown. With output-block tracking
	// the request books the blocks its output will fill (see
	// load.Request.OutputTokens).
	OutputTokens int
	// OverlapScoreCredit, when set, replaces the KV cost model's device
	// overlap credit for this request (nvext.agent_hints.overlap_score_credit).
	OverlapScoreCredit *float64
	// PrefillFailed marks the second Route of a request whose prefill hop
	// failed on its engine: a disaggregated model routes it to another
	// pair, never whole on a decode engine, as the reference router never
	// retries a dispatched prefill through an aggregated path.
	PrefillFailed bool
}

// MaxPriority bounds Priority: a day of arrival credit is already
// "always first"; a bound keeps keys finite.
const MaxPriority = 86400

// Pin names an exact target engine, from the worker-instance headers.
type Pin struct {
	Engine  routing.WorkerID
	Rank    uint32
	AnyRank bool
}

// Decision is the engine chosen for a request, and the handle through which
// the frontend reports the request's progress. OnFirstToken and Done must be
// called from the request's goroutine; Done exactly once, also on errors and
// client disconnects, so the load accounting is freed.
type Decision struct {
	Worker routing.Worker
	// EndpointURL is the engine's OpenAI-compatible base URL (no /v1).
	EndpointURL string
	// Blocks and CachedBlocks are the prompt's complete blocks and how many
	// of them the chosen worker holds (predicted).
	Blocks, CachedBlocks int
	// SessionBound reports that a session binding decided the engine.
	SessionBound bool
	// Prefill, when set, makes the decision disaggregated: Worker is the
	// decode engine, and Prefill the engine that computes the prompt's KV
	// cache and hands it off to it (see PrefillHop). Blocks and
	// CachedBlocks are then the prompt's on the prefill engine. Nil for an
	// aggregated decision.
	Prefill *PrefillHop

	onFirstToken func()
	onOutput     func(n int)
	done         func(error)
	lost         context.Context
}

// NewDecision builds a decision with its progress callbacks; the
// dispatcher uses it, and tests of the frontend use it to fake one.
func NewDecision(w routing.Worker, endpoint string, onFirstToken func(), done func(error)) *Decision {
	return &Decision{Worker: w, EndpointURL: endpoint, onFirstToken: onFirstToken, done: done}
}

// OnFirstToken reports that the engine produced the first token: the
// request's prefill is over.
func (d *Decision) OnFirstToken() {
	if d.onFirstToken != nil {
		d.onFirstToken()
		d.onFirstToken = nil
	}
}

// WithOutputTokens sets the callback of OnOutputTokens and returns d; the
// dispatcher sets its booking's.
func (d *Decision) WithOutputTokens(fn func(n int)) *Decision {
	d.onOutput = fn
	return d
}

// OnOutputTokens reports n more tokens the engine generated: one per
// streamed chunk as it is relayed, or an answer's count when it does not
// stream. With output-block tracking they are the request's decode load
// (see policy.Booking.OutputTokens); the call costs a few integer
// operations until the sequence crosses a block boundary. Calls after
// Done do nothing.
func (d *Decision) OnOutputTokens(n int) {
	if d.onOutput != nil && d.done != nil {
		d.onOutput(n)
	}
}

// WithLost sets the context that ends when the decision's engine is lost
// (see Lost) and returns d; the dispatcher sets its engine's, tests of
// the frontend their own.
func (d *Decision) WithLost(lost context.Context) *Decision {
	d.lost = lost
	return d
}

// Lost is done when the registry dropped the decision's engine for
// silence (Dispatcher.EngineSilent): the engine will not answer, and the
// frontend ends the request. context.Cause wraps ErrEngineSilent. A
// decision built by NewDecision alone is never lost.
func (d *Decision) Lost() context.Context { return cmp.Or(d.lost, context.Background()) }

// Done reports the end of the request; err is nil on success. Later calls
// do nothing. It also ends a prefill hop whose Done was not called, as
// failed (but never as unreachable: err is the decode hop's).
func (d *Decision) Done(err error) {
	if d.Prefill != nil {
		d.Prefill.abandon(err)
	}
	if d.done != nil {
		d.done(err)
		d.done = nil
	}
}

// Model is one model the node can serve, for /v1/models.
type Model struct {
	ID      string
	Created time.Time
	// Engines is the number of live engines serving it.
	Engines int
}

// Router is what the HTTP frontend needs of the node's decision path.
type Router interface {
	// Route chooses an engine for r, books the request on it and returns
	// the decision. Errors are classified by the sentinels below.
	Route(ctx context.Context, r *Request) (*Decision, error)
	// Models lists the models served by live engines.
	Models() []Model
	// Unbind ends a session's binding (explicit unbind).
	Unbind(ctx context.Context, sessionID string) error
}

// Errors of Route, mapped to HTTP status by the frontend's one error table.
var (
	// ErrBadRequest: the request cannot be routed as sent (400).
	ErrBadRequest = errors.New("dispatch: bad request")
	// ErrModelNotFound: no live engine serves the model (404).
	ErrModelNotFound = errors.New("dispatch: model not found")
	// ErrPromptTooLong: the prompt exceeds the limit (400).
	ErrPromptTooLong = errors.New("dispatch: prompt too long")
	// ErrOverloaded: every eligible engine is over its busy thresholds (529
	// by default, configurable).
	ErrOverloaded = errors.New("dispatch: all engines overloaded")
	// ErrNoEngine: no engine is available at all (503).
	ErrNoEngine = errors.New("dispatch: no engine available")
	// ErrSessionLimit: too many sessions, or an id over the length limit
	// (429/400). It is the decision path's sentinel, so that a session
	// store can return either name.
	ErrSessionLimit = policy.ErrSessionLimit
)

// ErrEngineUnreachable is not returned by Route: the frontend passes it
// (wrapped) to Decision.Done when the chosen engine could not be reached
// and nothing was sent to it. The dispatcher then leaves that engine out
// of selection for Config.SuspectTimeout, so that the frontend's second
// Route, and the requests after it, go elsewhere.
var ErrEngineUnreachable = errors.New("dispatch: engine unreachable")

// ErrEngineSilent is the cause of a Decision.Lost context: the engine
// went silent and was dropped, so its requests were ended.
var ErrEngineSilent = errors.New("dispatch: engine went silent")

// Engines is what the dispatcher needs of the engine registry. The node's
// event plane implements it; tests use a hand-written fake.
//
// Concurrency: every method is called concurrently from request
// goroutines and must be safe for that. Workers is on the hot path: it
// should not allocate, e.g. by returning a per-model slice that the
// registry replaces (copy on write) rather than mutates.
type Engines interface {
	// Workers returns the live ranks serving model and whether the model is
	// known at all (served by some registered engine, live or not). The
	// dispatcher reads the slice and never modifies or retains it.
	Workers(model string) (ranks []routing.WorkerInfo, known bool)
	// Endpoint returns an engine's OpenAI-compatible base URL (no /v1).
	Endpoint(id routing.WorkerID) (string, bool)
	// Models lists the models served by live engines, for /v1/models.
	Models() []Model
}

// LoadReporter is optionally implemented by an Engines: the load each rank
// last reported (in its heartbeat), which the projection combines with the
// node's own bookings as policy.LoadReporter says.
type LoadReporter = policy.LoadReporter
