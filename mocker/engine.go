package mocker

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// ErrBusy is returned by ResetCache while requests are running, because
// their blocks cannot be dropped (vLLM refuses reset_prefix_cache then too).
var ErrBusy = errors.New("mocker: engine has running requests")

// Engine is one simulated inference engine rank driven by a virtual clock.
// It is not safe for concurrent use: one goroutine drives it.
type Engine struct {
	cfg    Config
	worker routing.Worker
	log    *eventLog
	cache  *cache

	waiting queue
	running []*seq
	// transfers are the requests waiting for their KV cache from a
	// prefill engine, by arrival time (transfer.go).
	transfers []*seq
	active    map[string]struct{}

	// clock is the latest time seen; lastEnd the end of the last completed
	// iteration. busy says an iteration [cur.start, cur.end) is in flight.
	clock   time.Time
	lastEnd time.Time
	busy    bool
	stalled bool
	cur     iteration

	out StepResult
}

// iteration is one scheduled engine step.
type iteration struct {
	start, end time.Time
	work       []work
}

// work is one request's share of an iteration: n tokens computed after
// context tokens already in the cache.
type work struct {
	s      *seq
	n      int
	decode bool
}

// New returns an idle engine for worker w. The config is completed with
// defaults and validated.
func New(cfg Config, w routing.Worker) (*Engine, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := newEventLog(w, cfg.EventRingSize)
	return &Engine{
		cfg: cfg, worker: w, log: log,
		cache:  newCache(cfg.NumBlocks, log),
		active: make(map[string]struct{}),
	}, nil
}

// Config returns the engine's effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// Info is what the engine advertises to the router.
func (e *Engine) Info() routing.WorkerInfo {
	return routing.WorkerInfo{
		Worker: e.worker, Model: e.cfg.Model, BlockSize: e.cfg.BlockSize,
		TotalBlocks: e.cfg.NumBlocks, MaxBatchedTokens: e.cfg.MaxNumBatchedTokens,
		Device: routing.DeviceGPU,
	}
}

// Submit queues req, arrived at now, at the back of the waiting queue. It
// does not start work: the engine picks the request up at the first
// iteration boundary at or after now, which NextEventTime reports. Times
// given to Submit must not go back before any time the engine has seen.
func (e *Engine) Submit(req Request, now time.Time) error {
	if now.Before(e.clock) {
		return fmt.Errorf("%w: submit at %v after %v", ErrTimeBackwards, now, e.clock)
	}
	if _, dup := e.active[req.ID]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicateID, req.ID)
	}
	s, err := newSeq(req, &e.cfg, now)
	if err != nil {
		return err
	}
	e.clock = now
	e.active[s.id] = struct{}{}
	if s.remote {
		e.startTransfer(s, now)
	} else {
		e.waiting.pushBack(s)
	}
	e.stalled = false
	return nil
}

// NextEventTime is when the engine next needs Advance: the end of the
// iteration in flight, or, when idle with queued work, the time the next
// iteration can start. It reports false when the engine is idle and empty.
func (e *Engine) NextEventTime() (time.Time, bool) {
	if e.busy {
		return e.cur.end, true
	}
	if e.stalled {
		return time.Time{}, false
	}
	return e.nextStart()
}

// nextStart is when an idle engine can start its next iteration: at
// once with running requests, else when the first queued request arrived
// or the next transferred cache comes, whichever is first.
func (e *Engine) nextStart() (time.Time, bool) {
	if len(e.running) > 0 {
		return e.lastEnd, true
	}
	t, ok := e.nextTransfer()
	if head := e.waiting.front(); head != nil && (!ok || head.arrival.Before(t)) {
		t, ok = head.arrival, true
	}
	if !ok {
		return time.Time{}, false
	}
	if t.Before(e.lastEnd) {
		return e.lastEnd, true
	}
	return t, true
}

// Advance completes every iteration that ends at or before now, starting
// each next iteration at the end of the previous one (or at the arrival of
// the next request when idle), and returns what happened.
func (e *Engine) Advance(now time.Time) StepResult {
	if now.After(e.clock) {
		e.clock = now
	}
	for {
		if e.busy {
			if e.cur.end.After(now) {
				break
			}
			e.complete()
			continue
		}
		start, ok := e.nextStart()
		if !ok || start.After(now) || e.stalled {
			break
		}
		if !e.schedule(start) {
			// Unreachable while the invariants hold (a request alone on the
			// engine always fits); stalling keeps a driver from spinning.
			e.stalled = true
			break
		}
	}
	out := e.out
	out.Events = e.log.drain()
	e.out = StepResult{}
	return out
}

// ResetCache drops every cached block and emits Cleared, as vLLM's
// reset_prefix_cache; the event is returned by the next Advance. It refuses
// with ErrBusy while requests are running.
func (e *Engine) ResetCache() error {
	if len(e.running) > 0 {
		return fmt.Errorf("%w: %d running", ErrBusy, len(e.running))
	}
	e.cache.clear()
	return nil
}

// EventsSince returns the buffered events with ids above after, for a
// consumer that detected a gap; ErrEventsGone means it must use Dump.
func (e *Engine) EventsSince(after uint64) ([]routing.Event, error) {
	return e.log.since(after)
}

// LastEventID is the id of the last event emitted (0 before any).
func (e *Engine) LastEventID() uint64 { return e.log.lastID }
