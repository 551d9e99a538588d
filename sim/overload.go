package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/queue"
	"github.com/kvrouter/kvrouter/traces"
)

// The overload benchmark: offered load beyond the fleet's capacity, two
// policy classes weighted 3:1, a mixed-length workload, and the router's
// admission either refusing at once (no queue) or queueing (fcfs, wspt)
// through the real queue (routing/queue) and decision path
// (policy.Decider). It reports goodput within a TTFT SLO, TTFT per class,
// each class's share of service while both are backlogged, and
// rejections.

// Overload modes.
const (
	ModeNoQueue = "none"
	ModeFCFS    = "fcfs"
	ModeWSPT    = "wspt"
)

// OverloadConfig is one overload run.
type OverloadConfig struct {
	// Engines is the fleet size (default 4).
	Engines int
	// Requests is the number of requests offered (default 2000).
	Requests int
	// Load is the offered load as a multiple of Capacity.
	Load float64
	// Capacity is the fleet's throughput in requests per second on this
	// workload; 0 measures it first (MeasureCapacity).
	Capacity float64
	// Mode is ModeNoQueue, ModeFCFS or ModeWSPT.
	Mode string
	// Threshold is the busy threshold, a multiple of the engines'
	// max_num_batched_tokens in active prefill tokens (default 1).
	Threshold float64
	// SLO is the TTFT within which a request counts as goodput (default
	// 2 s); MaxWait, when set, refuses a request queued longer (default
	// none, as the reference: every queued request is served).
	SLO, MaxWait time.Duration
	// Quanta are the two classes' DRR quanta (default 1536 and 512, 3:1).
	Quanta [2]int64
	// Seed fixes the workload and the tie-breaks (default 1).
	Seed uint64
}

func (c OverloadConfig) withDefaults() OverloadConfig {
	if c.Engines == 0 {
		c.Engines = 4
	}
	if c.Requests == 0 {
		c.Requests = 2000
	}
	if c.Threshold == 0 {
		c.Threshold = 1
	}
	if c.SLO == 0 {
		c.SLO = 2 * time.Second
	}
	if c.MaxWait == 0 {
		c.MaxWait = 24 * time.Hour
	}
	if c.Quanta == [2]int64{} {
		c.Quanta = [2]int64{1536, 512}
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// ClassResult is one class's figures.
type ClassResult struct {
	Name   string
	Weight float64 // its share of the quanta
	// Offered, Finished, Good (TTFT within the SLO) and Rejected count
	// requests.
	Offered, Finished, Good, Rejected int
	TTFTP50Ms, TTFTP99Ms, TTFTMeanMs  float64
	// Share is the class's share of the tokens dispatched from the queue
	// while both classes were backlogged (0 without a queue).
	Share float64
}

// OverloadResult is one run's figures.
type OverloadResult struct {
	Mode       string
	Load       float64
	OfferedRPS float64
	// GoodputRPS is requests finishing within the SLO per second of the
	// offered span; GoodFrac their share of the offered requests.
	GoodputRPS, GoodFrac float64
	TTFTMeanMs           float64
	Rejected             int
	Classes              [2]ClassResult
	// BackloggedSeconds is how long both classes were backlogged.
	BackloggedSeconds float64
}

// overloadWorkload makes n requests: classes alternate at random, 75% of
// prompts are 512 tokens and 25% are 4,096, each with 32 output tokens,
// no shared prefixes (so the cache does not blur the queue's effect),
// Poisson arrivals at rps (all at 0 when rps is 0).
func overloadWorkload(n int, rps float64, seed uint64) ([]traces.Request, []int) {
	rng := rand.New(rand.NewPCG(seed, 0x6f766c64))
	reqs, classes := make([]traces.Request, n), make([]int, n)
	var at float64
	next := uint64(1)
	for i := range reqs {
		if rps > 0 {
			at += rng.ExpFloat64() / rps
		}
		isl := 512
		if rng.Float64() < 0.25 {
			isl = 4096
		}
		ids := make([]uint64, isl/512)
		for k := range ids {
			ids[k] = next
			next++
		}
		reqs[i] = traces.Request{Arrival: time.Duration(at * float64(time.Second)), InputTokens: isl, OutputTokens: 32, HashIDs: ids}
		classes[i] = rng.IntN(2)
	}
	return reqs, classes
}

// MeasureCapacity is the fleet's throughput on the overload workload:
// every request offered at once, queued fcfs without a bound.
func MeasureCapacity(ctx context.Context, cfg OverloadConfig) (float64, error) {
	cfg = cfg.withDefaults()
	cfg.Mode, cfg.MaxWait = ModeFCFS, 24*time.Hour
	reqs, classes := overloadWorkload(cfg.Requests, 0, cfg.Seed)
	o, err := newOverload(cfg, reqs, classes)
	if err != nil {
		return 0, err
	}
	if err := o.run(ctx); err != nil {
		return 0, err
	}
	span := o.last.Sub(epoch).Seconds()
	if span <= 0 {
		return 0, errors.New("sim: capacity run finished in no time")
	}
	return float64(o.finished) / span, nil
}

// Overload runs one overload configuration.
func Overload(ctx context.Context, cfg OverloadConfig) (OverloadResult, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Mode != ModeNoQueue && cfg.Mode != ModeFCFS && cfg.Mode != ModeWSPT:
		return OverloadResult{}, fmt.Errorf("%w: mode must be none, fcfs or wspt, got %q", ErrConfig, cfg.Mode)
	case !(cfg.Load > 0):
		return OverloadResult{}, fmt.Errorf("%w: load must be > 0", ErrConfig)
	}
	if cfg.Capacity == 0 {
		c, err := MeasureCapacity(ctx, cfg)
		if err != nil {
			return OverloadResult{}, err
		}
		cfg.Capacity = c
	}
	reqs, classes := overloadWorkload(cfg.Requests, cfg.Load*cfg.Capacity, cfg.Seed)
	o, err := newOverload(cfg, reqs, classes)
	if err != nil {
		return OverloadResult{}, err
	}
	if err := o.run(ctx); err != nil {
		return OverloadResult{}, err
	}
	return o.result(), nil
}

// overload is one run's state.
type overload struct {
	cfg     OverloadConfig
	prompts []Prompt
	classes []int
	engines []*mocker.Engine
	router  *router
	q       *queue.Queue
	classTh policy.Thresholds
	items   []*queue.Item // per request, while queued
	fifo    []int         // queued request indexes in arrival order, for expiry

	next, finished int
	ttft           [2][]time.Duration
	good, rejected [2]int
	served         [2]int64
	backlogged     time.Duration
	last           time.Time
	now            time.Time
}

func newOverload(cfg OverloadConfig, reqs []traces.Request, classes []int) (*overload, error) {
	w, err := NewWorkload(DefaultBlockSize)
	if err != nil {
		return nil, err
	}
	o := &overload{cfg: cfg, prompts: w.Prompts(reqs), classes: classes, items: make([]*queue.Item, len(reqs))}
	th := cfg.Threshold
	o.classTh.ActivePrefillTokensFrac = &th
	scfg := Config{Engines: cfg.Engines, Seed: cfg.Seed}.withDefaults()
	infos := make([]routing.WorkerInfo, cfg.Engines)
	for i := range cfg.Engines {
		e, err := mocker.New(scfg.Engine, routing.Worker{ID: routing.WorkerID(i + 1)})
		if err != nil {
			return nil, err
		}
		o.engines = append(o.engines, e)
		infos[i] = e.Info()
	}
	if cfg.Mode == ModeNoQueue {
		scfg.Thresholds = o.classTh
	}
	if o.router, err = newRouter(policy.NameKV, scfg, infos); err != nil {
		return nil, err
	}
	if cfg.Mode != ModeNoQueue {
		order, _ := queue.ParseOrder(cfg.Mode)
		o.q, err = queue.New(queue.Config{Order: order, Epoch: epoch, Classes: []queue.ClassConfig{
			{Name: "premium", Quantum: cfg.Quanta[0]}, {Name: "standard", Quantum: cfg.Quanta[1]}}})
	}
	return o, err
}

func (o *overload) arrival(i int) time.Time { return epoch.Add(time.Duration(o.prompts[i].Arrival)) }

// run is the event loop: arrivals, engine iterations and queue expiries.
func (o *overload) run(ctx context.Context) error {
	for steps := 0; ; steps++ {
		if steps%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		ei, et, busy := o.nextEngine()
		xt, expiring := o.nextExpiry()
		switch {
		case expiring && (!busy || !xt.After(et)) && (o.next >= len(o.prompts) || !xt.After(o.arrival(o.next))):
			o.advance(xt)
			o.expire()
		case o.next < len(o.prompts) && (!busy || !o.arrival(o.next).After(et)):
			o.advance(o.arrival(o.next))
			if err := o.arrive(o.next); err != nil {
				return err
			}
			o.next++
		case busy:
			o.advance(et)
			if err := o.step(ei, et); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// advance moves the clock, accounting the time both classes were
// backlogged.
func (o *overload) advance(t time.Time) {
	if o.q != nil && o.q.Backlogged(0) && o.q.Backlogged(1) {
		o.backlogged += t.Sub(o.now)
	}
	o.now = t
	o.router.now = t
}

func (o *overload) nextEngine() (int, time.Time, bool) {
	best, bt, ok := -1, time.Time{}, false
	for i, e := range o.engines {
		if t, busy := e.NextEventTime(); busy && (!ok || t.Before(bt)) {
			best, bt, ok = i, t, true
		}
	}
	return best, bt, ok
}

// nextExpiry is when the oldest queued request expires.
func (o *overload) nextExpiry() (time.Time, bool) {
	for len(o.fifo) > 0 && !o.items[o.fifo[0]].Queued() {
		o.fifo = o.fifo[1:]
	}
	if len(o.fifo) == 0 {
		return time.Time{}, false
	}
	return o.arrival(o.fifo[0]).Add(o.cfg.MaxWait), true
}

// expire refuses the queued requests past MaxWait.
func (o *overload) expire() {
	for len(o.fifo) > 0 {
		i := o.fifo[0]
		if it := o.items[i]; it.Queued() {
			if o.arrival(i).Add(o.cfg.MaxWait).After(o.now) {
				return
			}
			o.q.Remove(it)
			o.rejected[o.classes[i]]++
		}
		o.fifo = o.fifo[1:]
	}
}

// arrive admits, queues or refuses request i.
func (o *overload) arrive(i int) error {
	o.report()
	if o.q == nil {
		err := o.dispatch(i)
		if errors.Is(err, policy.ErrAllWorkersOverloaded) {
			o.rejected[o.classes[i]]++
			return nil
		}
		return err
	}
	it := &queue.Item{Class: o.classes[i], Arrival: o.arrival(i), ISL: o.prompts[i].InputTokens, Value: i}
	if !o.q.Backlogged(it.Class) && o.ready(it) {
		return o.dispatch(i)
	}
	o.items[i] = it
	o.fifo = append(o.fifo, i)
	return o.q.Push(it, len(o.engines))
}

// ready is the queue's readiness test: some engine under the class's
// busy threshold, on the router's current loads.
func (o *overload) ready(*queue.Item) bool {
	q := policy.Query{Ranks: o.router.infos}
	if err := o.router.core.Candidates(&o.router.sc, &q, o.now); err != nil {
		return false
	}
	o.router.core.CurrentLoads(&o.router.sc)
	return o.router.sc.Free(nil, &o.classTh) > 0
}

// pump dispatches queued requests while an engine is free.
func (o *overload) pump() error {
	if o.q == nil {
		return nil
	}
	for {
		both := o.q.Backlogged(0) && o.q.Backlogged(1)
		it := o.q.Next(o.ready)
		if it == nil {
			return nil
		}
		if both {
			o.served[it.Class] += it.Cost()
		}
		if err := o.dispatch(it.Value.(int)); err != nil {
			return err
		}
	}
}

// dispatch routes request i through the decision path and submits it.
func (o *overload) dispatch(i int) error {
	p := &o.prompts[i]
	rt, err := o.router.route(strconv.Itoa(i), p, o.now)
	if err != nil {
		return err
	}
	req := mocker.Request{ID: strconv.Itoa(i), Locals: p.Locals, Seqs: p.Hashes, PromptTokens: p.InputTokens, MaxTokens: max(1, p.OutputTokens)}
	return o.engines[rt.slot].Submit(req, o.now)
}

// step advances engine e to t, feeds the router and pumps the queue.
func (o *overload) step(e int, t time.Time) error {
	res := o.engines[e].Advance(t)
	for k := range res.Events {
		if err := o.router.idx.Apply(&res.Events[k]); err != nil {
			return err
		}
	}
	for _, ft := range res.FirstTokens {
		o.router.firstToken(ft.ID, t)
	}
	for _, c := range res.Finished {
		o.router.done(c.ID, t)
		i, _ := strconv.Atoi(c.ID)
		ttft := c.FirstToken.Sub(o.arrival(i))
		o.ttft[o.classes[i]] = append(o.ttft[o.classes[i]], ttft)
		if ttft <= o.cfg.SLO {
			o.good[o.classes[i]]++
		}
		o.finished++
		o.last = c.Done
	}
	o.report()
	return o.pump()
}

// report gives the router the engines' loads, as heartbeats would; here
// after every arrival and iteration, so that a queue never waits on a
// stale report (a node's queue polls instead).
func (o *overload) report() {
	for _, e := range o.engines {
		o.router.reports[e.Info().Worker] = e.Load().Routing()
	}
}

func (o *overload) result() OverloadResult {
	span := o.arrival(len(o.prompts) - 1).Sub(epoch).Seconds()
	r := OverloadResult{Mode: o.cfg.Mode, Load: o.cfg.Load, BackloggedSeconds: o.backlogged.Seconds()}
	if span > 0 {
		r.OfferedRPS = float64(len(o.prompts)) / span
	}
	var all []time.Duration
	good := 0
	total := float64(o.cfg.Quanta[0] + o.cfg.Quanta[1])
	for c := range 2 {
		cr := ClassResult{Name: []string{"premium", "standard"}[c], Weight: float64(o.cfg.Quanta[c]) / total,
			Finished: len(o.ttft[c]), Good: o.good[c], Rejected: o.rejected[c],
			TTFTP50Ms: ms(Percentile(o.ttft[c], 0.5)), TTFTP99Ms: ms(Percentile(o.ttft[c], 0.99)), TTFTMeanMs: ms(Mean(o.ttft[c]))}
		for _, k := range o.classes {
			if k == c {
				cr.Offered++
			}
		}
		if s := o.served[0] + o.served[1]; s > 0 {
			cr.Share = float64(o.served[c]) / float64(s)
		}
		r.Classes[c] = cr
		all = append(all, o.ttft[c]...)
		good += o.good[c]
		r.Rejected += o.rejected[c]
	}
	r.TTFTMeanMs = ms(Mean(all))
	r.GoodFrac = float64(good) / float64(len(o.prompts))
	if span > 0 {
		r.GoodputRPS = float64(good) / span
	}
	return r
}
