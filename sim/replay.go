package sim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/routing"
)

// epoch is the virtual clock's origin; only differences matter.
var epoch = time.Unix(1_700_000_000, 0).UTC()

// replay is one policy's run over one workload.
type replay struct {
	cfg     Config
	prompts []Prompt
	engines []*mocker.Engine
	router  *router

	next int // next prompt to arrive
	// nextReport is when the engines next report their load.
	nextReport time.Time
	decisions  []time.Duration
	ttft       []time.Duration
	itl        []time.Duration
	prefill    []float64 // prompt tokens computed, per engine
	hits       int64
	blocks     int64
	outTokens  int64
	done       int
	last       time.Time

	// refs are the workload's references; trace is the per-decision
	// trace and timeline.
	refs  References
	trace *traceRecorder
	// dis is a disaggregated replay's state (disagg.go), nil otherwise.
	dis *disaggState
}

// Run replays prompts through the named policy and returns its figures,
// with the workload's references (see NewReferences) and its share of
// them.
func Run(ctx context.Context, prompts []Prompt, name string, refs References, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.withDefaults()
	rp, err := newReplay(prompts, name, cfg)
	if err != nil {
		return Result{}, err
	}
	rp.refs = refs
	if err := rp.run(ctx); err != nil {
		return Result{}, fmt.Errorf("policy %s: %w", name, err)
	}
	return rp.result(name), nil
}

func newReplay(prompts []Prompt, name string, cfg Config) (*replay, error) {
	rp := &replay{cfg: cfg, prompts: prompts, prefill: make([]float64, cfg.Engines),
		trace: newTraceRecorder(len(prompts))}
	infos := make([]routing.WorkerInfo, cfg.Engines)
	for i := range cfg.Engines {
		e, err := mocker.New(cfg.Engine, routing.Worker{ID: routing.WorkerID(i + 1)})
		if err != nil {
			return nil, err
		}
		rp.engines = append(rp.engines, e)
		infos[i] = e.Info()
	}
	if cfg.PrefillEngines > 0 {
		disaggInfos(infos, cfg.PrefillEngines)
		rp.dis = &disaggState{decode: make(map[string]int)}
	}
	r, err := newRouter(name, cfg, infos)
	if err != nil {
		return nil, err
	}
	rp.router = r
	return rp, nil
}

// arrival is when prompt i reaches the router on the virtual clock.
func (rp *replay) arrival(i int) time.Time {
	return epoch.Add(time.Duration(float64(rp.prompts[i].Arrival) / rp.cfg.RateScale))
}

// run is the discrete-event loop: the earliest of the next arrival and the
// engines' next iteration ends happens next; arrivals win ties so that a
// request arriving as an iteration ends can join the next one.
func (rp *replay) run(ctx context.Context) error {
	for steps := 0; ; steps++ {
		if steps%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		ei, et, busy := rp.nextEngine()
		switch {
		case rp.next < len(rp.prompts) && (!busy || !rp.arrival(rp.next).After(et)):
			if err := rp.admit(rp.next); err != nil {
				return err
			}
			rp.next++
		case busy:
			if err := rp.step(ei, et); err != nil {
				return err
			}
		default:
			if rp.done != len(rp.prompts) {
				return fmt.Errorf("engines idle with %d of %d requests unfinished", len(rp.prompts)-rp.done, len(rp.prompts))
			}
			return nil
		}
	}
}

// report gives the router every engine's load, as the engines' heartbeats
// do, once per ReportInterval: the load the router sees is up to one
// interval old, as a heartbeat's is.
func (rp *replay) report(now time.Time) {
	if rp.cfg.NoLoadReports || now.Before(rp.nextReport) {
		return
	}
	for _, e := range rp.engines {
		rp.router.reports[e.Info().Worker] = e.Load().Routing()
	}
	rp.nextReport = now.Add(rp.cfg.ReportInterval)
}

func (rp *replay) nextEngine() (int, time.Time, bool) {
	best, bt, ok := -1, time.Time{}, false
	for i, e := range rp.engines {
		if t, busy := e.NextEventTime(); busy && (!ok || t.Before(bt)) {
			best, bt, ok = i, t, true
		}
	}
	return best, bt, ok
}

func (rp *replay) admit(i int) error {
	if rp.dis != nil {
		return rp.admitPair(i)
	}
	p := &rp.prompts[i]
	now := rp.arrival(i)
	id := strconv.Itoa(i)
	rp.report(now)
	rp.trace.sample(now, rp.engines)
	rt, err := rp.router.route(id, p, now)
	if err != nil {
		return fmt.Errorf("routing request %d: %w", i, err)
	}
	slot := rt.slot
	rp.decisions = append(rp.decisions, rt.took)
	rp.trace.decided(i, p, now, rt, hitLimit(p, rp.cfg.BlockSize))
	req := mocker.Request{ID: id, Locals: p.Locals, Seqs: p.Hashes, PromptTokens: p.InputTokens,
		MaxTokens: max(1, p.OutputTokens)}
	if err := rp.engines[slot].Submit(req, now); err != nil {
		return fmt.Errorf("submitting request %d: %w", i, err)
	}
	return nil
}

// step advances engine i to t and feeds what happened back to the router.
func (rp *replay) step(i int, t time.Time) error {
	res := rp.engines[i].Advance(t)
	for k := range res.Events {
		if rp.cfg.NoKVEvents {
			break
		}
		if err := rp.router.idx.Apply(&res.Events[k]); err != nil {
			return fmt.Errorf("engine %d event %d: %w", i+1, res.Events[k].ID, err)
		}
	}
	if rp.dis != nil {
		return rp.stepPair(i, t, &res)
	}
	for _, a := range res.Admitted {
		if !a.Readmission {
			rp.trace.admitted(a.ID, a.HitBlocks)
		}
	}
	for _, ft := range res.FirstTokens {
		rp.router.firstToken(ft.ID, t)
		rp.trace.firstToken(ft.ID, rp.prompts)
	}
	rp.reportOutput(i, t)
	for _, c := range res.Finished {
		rp.router.done(c.ID, t)
		rp.finish(i, c)
	}
	return nil
}

// reportOutput gives the router, with output tracking, the tokens each
// request running on engine i has generated by t.
func (rp *replay) reportOutput(i int, t time.Time) {
	if rp.cfg.TrackOutputBlocks {
		rp.engines[i].EachRunning(func(id string, n int) { rp.router.output(id, n, t) })
	}
}

func (rp *replay) finish(i int, c mocker.Completion) {
	rp.done++
	rp.ttft = append(rp.ttft, c.TTFT())
	rp.trace.finished(c.ID, c.TTFT(), c.Done)
	if c.OutputTokens > 1 {
		rp.itl = append(rp.itl, c.MeanITL())
	}
	rp.hits += int64(c.HitBlocks)
	rp.blocks += int64(c.PromptBlocks)
	rp.prefill[i] += float64(c.PromptTokens - c.HitBlocks*rp.cfg.BlockSize)
	rp.outTokens += int64(c.OutputTokens)
	if c.Done.After(rp.last) {
		rp.last = c.Done
	}
}

func (rp *replay) result(name string) Result {
	r := Result{Policy: name, Engines: rp.cfg.Engines, Requests: rp.done}
	r.HitRatio = ratio(rp.hits, rp.blocks)
	r.setReferences(rp.refs)
	r.TTFTMeanMs = ms(Mean(rp.ttft))
	r.TTFTP50Ms = ms(Percentile(rp.ttft, 0.50))
	r.TTFTP99Ms = ms(Percentile(rp.ttft, 0.99))
	r.ITLP50Ms = ms(Percentile(rp.itl, 0.50))
	r.ITLP99Ms = ms(Percentile(rp.itl, 0.99))
	r.LoadMaxOverMean = MaxOverMean(rp.prefill)
	if rp.dis != nil {
		// Only the prefill engines prefill; the decode engines compute
		// tails.
		r.LoadMaxOverMean = MaxOverMean(rp.prefill[:rp.cfg.PrefillEngines])
		r.PrefillEngines = rp.cfg.PrefillEngines
	}
	if len(rp.prompts) > 0 {
		span := rp.last.Sub(rp.arrival(0)).Seconds()
		r.SimulatedSeconds = span
		if span > 0 {
			r.ThroughputTokPerS = float64(rp.outTokens) / span
			r.ThroughputReqPerS = float64(rp.done) / span
		}
	}
	r.DecisionP50Us = us(Percentile(rp.decisions, 0.50))
	r.DecisionP99Us = us(Percentile(rp.decisions, 0.99))
	r.Detail = rp.trace.detail(rp.refs)
	r.Losses = r.Detail.Losses()
	return r
}
