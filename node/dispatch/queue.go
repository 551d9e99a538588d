package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/policyclass"
	"github.com/kvrouter/kvrouter/routing/queue"
)

// The admission queue, when Config.Queue.Policy is set. Each model has a
// queue of its profile's classes (routing/queue). A request is queued
// when its class already has a backlog (arrivals may not bypass it) or
// when no candidate is free under both the model's busy thresholds and its
// class's; otherwise it is routed at once. A queued request's goroutine
// waits for its turn; turns are handed out one at a time per model, by
// the queue's deficit round robin, whenever capacity may have freed: a
// request of this node got its first token or ended, the thresholds
// changed, a turn ended, or a poll interval passed (for load that the
// engines report). A request that has its turn routes afresh (new
// candidates, overlap and load) and, if the fleet filled up meanwhile,
// goes back to its place. The client leaving removes it at once; its
// class's max wait refuses it with 529 (503 when no engine serves the
// model any more).

// queues are the per-model queues.
type queues struct {
	cfg  QueueConfig
	base policy.Options
	seed uint64
	m    *metrics.Queue
	mu   sync.Mutex
	by   map[string]*modelQueue
}

// modelQueue is one model's queue and turn state.
type modelQueue struct {
	model   string
	profile *policyclass.Profile
	sel     policy.Selector
	m       *metrics.Queue
	mu      sync.Mutex
	q       *queue.Queue
	// turn is set while a request has its turn and has not finished its
	// attempt; no other turn is handed out meanwhile.
	turn bool
	// deciding counts requests routed at once (not queued) whose booking
	// is not made yet: their load is not visible in the free test, so
	// no more of them are let through than there are free workers.
	deciding int
}

// waiter is a queued request's side of its turn.
type waiter struct {
	turn chan struct{}
	// only, when not nil, are the engines whose free capacity can serve
	// the request: its pinned engine, or its allowed set.
	only []routing.WorkerID
}

// newQueues builds the queues, nil when the queue is off.
func newQueues(c Config, m *metrics.Metrics) *queues {
	if c.Queue.Policy == nil {
		return nil
	}
	qs := &queues{cfg: c.Queue.withDefaults(), seed: c.Seed, by: map[string]*modelQueue{},
		base: policy.Options{KV: c.KV, TwoTier: c.TwoTier, DeviceAware: c.DeviceAware}}
	if m != nil {
		qs.m = m.QueueMetrics()
	}
	return qs
}

// get returns a model's queue if it has one; nil-safe.
func (qs *queues) get(model string) *modelQueue {
	if qs == nil {
		return nil
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.by[model]
}

// of returns a model's queue, creating it from the model's profile.
func (qs *queues) of(model string) (*modelQueue, error) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if mq := qs.by[model]; mq != nil {
		return mq, nil
	}
	p := qs.cfg.Policy.For(model)
	cc := make([]queue.ClassConfig, len(p.Classes))
	for i, c := range p.Classes {
		cc[i] = c.ClassConfig
	}
	q, err := queue.New(queue.Config{Order: p.Order, Classes: cc})
	if err != nil {
		return nil, configError("router_policy_config: %w", err)
	}
	mq := &modelQueue{model: model, profile: p, q: q, m: qs.m}
	if p.Selection != nil {
		o := p.Selection.Options(qs.base)
		o.Rand = rand.New(rand.NewPCG(qs.seed, uint64(len(qs.by))+1))
		if mq.sel, err = policy.New(p.Selection.Policy, o); err != nil {
			return nil, configError("router_policy_config: worker_selection: %w", err)
		}
	}
	qs.by[model] = mq
	return mq, nil
}

// routeQueued is Route with the queue: candidates and matching, the
// class, then routing at once or waiting for a turn.
func (d *Dispatcher) routeQueued(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases) (*Decision, error) {
	mq, err := d.queues.of(r.Model)
	if err != nil {
		return nil, err
	}
	if q.Selector == nil { // a worker set's advertised selector wins (advertised.go)
		q.Selector = mq.sel
	}
	if err := d.prepare(sc, r, q, ph); err != nil {
		return nil, err
	}
	cl := mq.profile.Classify(r.PolicyClass, q.ISLTokens, sc.BestCachedTokens())
	if cl.Fallback {
		// The reference router quietly serves such a request in the default
		// family; a misspelt class would then be served at another priority
		// without anyone noticing, so the request is refused and counted.
		if mq.m != nil {
			mq.m.ClassFallbacks.WithLabelValues(r.Model).Inc()
		}
		return nil, fmt.Errorf("%w: x-dynamo-meta-policy-class %q names no policy class or family of model %s (known classes: %s)",
			ErrBadRequest, r.PolicyClass, r.Model, strings.Join(mq.profile.ClassNames(), ", "))
	}
	arrival := r.Arrival
	if arrival.IsZero() {
		arrival = ph.start
	}
	it := &queue.Item{Class: cl.Class, Jump: r.Priority, Strict: r.StrictPriority, Arrival: arrival,
		ISL: q.ISLTokens, Cached: sc.BestCachedTokens()}
	it.Value, it.Lane = newWaiter(r, q)
	mq.mu.Lock()
	if !mq.q.Backlogged(cl.Class) && !mq.turn && d.freeFor(mq, sc, it) > mq.deciding {
		mq.deciding++
		mq.mu.Unlock()
		dec, err := d.decideOnce(ctx, sc, r, q, ph, false)
		mq.mu.Lock()
		mq.deciding--
		if !errors.Is(err, ErrOverloaded) {
			mq.mu.Unlock()
			return dec, err
		}
	}
	err = mq.q.Push(it, len(q.Ranks))
	mq.observe()
	mq.mu.Unlock()
	if err != nil {
		return nil, d.refuse(mq, it, err)
	}
	return d.wait(ctx, sc, r, q, ph, mq, it)
}

// prepare is the candidates, hashing and matching of one attempt.
func (d *Dispatcher) prepare(sc *policy.Scratch, r *Request, q *policy.Query, ph *phases) error {
	ranks, known := d.engines.Workers(r.Model)
	if !known {
		return fmt.Errorf("%w: %q", ErrModelNotFound, r.Model)
	}
	if policy.HasRoles(ranks) {
		return errByRole
	}
	return d.prepareOn(sc, r, q, ph, ranks, false)
}

// decideOnce decides on prepared candidates (fresh ones when again is
// set), retrying once when the chosen engine left meanwhile. The queue's
// passes hash without the tracking identities, which only a booking needs:
// they are computed here, so that a queued request is booked under the
// same identities as one routed at once.
func (d *Dispatcher) decideOnce(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases, again bool) (*Decision, error) {
	if again {
		if err := d.prepare(sc, r, q, ph); err != nil {
			return nil, err
		}
	}
	if err := d.trackHash(sc, r); err != nil {
		return nil, err
	}
	dec, err := d.decide(ctx, sc, q)
	if errors.Is(err, errEngineGone) {
		dec, err = d.attempt(ctx, sc, r, q, ph)
	}
	return dec, err
}

// newWaiter is the queued request's waiter and its lane: a pinned
// request waits in its engine's lane, one with an allowed set in the
// set's, so that it neither takes the turn while only engines it cannot
// use are free nor holds up the requests behind it that they can serve.
func newWaiter(r *Request, q *policy.Query) (*waiter, *queue.Lane) {
	w := &waiter{turn: make(chan struct{}, 1)}
	switch {
	case r.Pin != nil:
		w.only = []routing.WorkerID{r.Pin.Engine}
		return w, &queue.Lane{Key: r.Pin.Engine}
	case q.Allowed != nil:
		w.only = q.Allowed
		return w, &queue.Lane{Key: laneOf(q.Allowed)}
	}
	return w, nil
}

// subsetLane keys the lane of an allowed set: its engine ids, sorted
// (as Dispatcher.allowed lists them).
type subsetLane string

func laneOf(allowed []routing.WorkerID) subsetLane {
	b := make([]byte, 0, 8*len(allowed))
	for _, id := range allowed {
		b = strconv.AppendUint(append(b, ','), uint64(id), 10)
	}
	return subsetLane(b)
}

// freeFor counts the candidates that can serve the item (its waiter's
// engines, when it names some) under the model's and the item's class's
// thresholds. The caller holds mq.mu and has run Candidates on sc.
func (d *Dispatcher) freeFor(mq *modelQueue, sc *policy.Scratch, it *queue.Item) int {
	d.core.CurrentLoads(sc)
	return sc.Free(it.Value.(*waiter).only, &mq.profile.Classes[it.Class].Thresholds)
}

// wait blocks until the item's turn, its client leaving, or its class's
// max wait.
func (d *Dispatcher) wait(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases, mq *modelQueue, it *queue.Item) (*Decision, error) {
	w := it.Value.(*waiter)
	tick := time.NewTicker(d.queues.cfg.Poll)
	defer tick.Stop()
	var expire <-chan time.Time
	if mw := mq.profile.Classes[it.Class].MaxWait; mw > 0 {
		t := time.NewTimer(mw - d.cfg.Now().Sub(it.Arrival))
		defer t.Stop()
		expire = t.C
	}
	d.pump(mq)
	for {
		select {
		case <-w.turn:
			dec, err, done := d.takeTurn(ctx, sc, r, q, ph, mq, it)
			if done {
				return dec, err
			}
		case <-tick.C:
			d.pump(mq)
		case <-ctx.Done():
			return nil, d.leave(mq, it, r, "canceled", ctx.Err())
		case <-expire:
			return nil, d.leave(mq, it, r, "expired", nil)
		}
	}
}

// takeTurn routes a request whose turn came; done is false when the fleet
// filled up again and the request went back to its place.
func (d *Dispatcher) takeTurn(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases, mq *modelQueue, it *queue.Item) (*Decision, error, bool) {
	dec, err := d.decideOnce(ctx, sc, r, q, ph, true)
	mq.mu.Lock()
	if errors.Is(err, ErrOverloaded) && ctx.Err() == nil {
		if rerr := mq.q.Requeue(it); rerr == nil {
			mq.turn = false
			mq.observe()
			mq.mu.Unlock()
			return nil, nil, false
		}
	}
	mq.turn = false
	mq.mu.Unlock()
	mq.waited(it, d.cfg.Now(), "dispatched")
	d.pump(mq)
	return dec, err, true
}

// leave takes a waiting request out (its client left, or it expired). If
// its turn had come meanwhile, the turn passes on.
func (d *Dispatcher) leave(mq *modelQueue, it *queue.Item, r *Request, outcome string, cause error) error {
	mq.mu.Lock()
	removed := mq.q.Remove(it)
	if !removed {
		// The turn was handed to this request; hand it on.
		select {
		case <-it.Value.(*waiter).turn:
		default:
		}
		mq.turn = false
	}
	mq.observe()
	mq.mu.Unlock()
	if !removed {
		d.pump(mq)
	}
	now := d.cfg.Now()
	mq.waited(it, now, outcome)
	if cause != nil {
		return cause
	}
	if ranks, _ := d.engines.Workers(r.Model); len(ranks) == 0 {
		return fmt.Errorf("%w: %q: queued %v and no engine serves it any more", ErrNoEngine, r.Model, now.Sub(it.Arrival))
	}
	e := &PolicyClassError{Class: mq.profile.Classes[it.Class].Name, Waited: now.Sub(it.Arrival), RetryAfter: d.queues.cfg.RetryAfter}
	mq.rejected(e)
	return e
}

// refuse turns a Push error into Route's.
func (d *Dispatcher) refuse(mq *modelQueue, it *queue.Item, err error) error {
	var le *queue.LimitError
	if !errors.As(err, &le) {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	e := &PolicyClassError{Class: le.Class, Limit: le, RetryAfter: d.queues.cfg.RetryAfter}
	mq.rejected(e)
	return e
}

// pump hands the next turn out, if no turn is running and some class has
// a ready request.
func (d *Dispatcher) pump(mq *modelQueue) {
	mq.mu.Lock()
	defer mq.mu.Unlock()
	if mq.turn || mq.q.Len() == 0 {
		return
	}
	ranks, _ := d.engines.Workers(mq.model)
	sc := d.scratch.Get().(*policy.Scratch)
	defer d.scratch.Put(sc)
	q := policy.Query{Model: mq.model, Ranks: ranks, Thresholds: d.rt.get(mq.model)}
	if d.core.Candidates(sc, &q, d.cfg.Now()) != nil {
		return
	}
	it := mq.q.Next(func(it *queue.Item) bool { return d.freeFor(mq, sc, it) > mq.deciding })
	if it == nil {
		return
	}
	mq.turn = true
	mq.observe()
	it.Value.(*waiter).turn <- struct{}{}
}

// pumpModel pumps a model's queue, if it has one: capacity may have freed.
func (d *Dispatcher) pumpModel(model string) {
	if mq := d.queues.get(model); mq != nil {
		d.pump(mq)
	}
}

// observe sets the pending gauges; the caller holds mq.mu.
func (mq *modelQueue) observe() {
	if mq.m == nil {
		return
	}
	for c := range mq.q.NumClasses() {
		s, n := mq.q.Stats(c), mq.q.ClassName(c)
		mq.m.PendingRequests.WithLabelValues(mq.model, n).Set(float64(s.Pending))
		mq.m.PendingISLTokens.WithLabelValues(mq.model, n).Set(float64(s.PendingISL))
		mq.m.PendingCachedTokens.WithLabelValues(mq.model, n).Set(float64(s.PendingCached))
	}
}

// waited records a request's time in the queue.
func (mq *modelQueue) waited(it *queue.Item, now time.Time, outcome string) {
	if mq.m != nil {
		mq.m.WaitSeconds.WithLabelValues(mq.model, mq.profile.Classes[it.Class].Name, outcome).Observe(now.Sub(it.Arrival).Seconds())
	}
}

// rejected counts a refusal.
func (mq *modelQueue) rejected(e *PolicyClassError) {
	if mq.m != nil {
		mq.m.Rejections.WithLabelValues(mq.model, e.Class, e.Reason()).Inc()
	}
}
