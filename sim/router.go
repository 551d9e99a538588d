package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// router is one router node's decision path as the replay drives it: the
// exact index the engines' KV events feed, and the node's own Decider
// (policy.Decider) over a fixed fleet, with an in-memory session store
// and the engines' load reports. It runs on the replay's virtual clock.
type router struct {
	idx  *index.Exact // nil in approximate mode
	core *policy.Decider
	// pair is the two-hop decision of a disaggregated replay (nil
	// otherwise), ds its scratch and pairs its bookings (disagg.go).
	pair     *policy.Disagg
	ds       policy.DisaggScratch
	pairs    map[string]*policy.PairBooking
	reports  reports
	infos    []routing.WorkerInfo
	slot     map[routing.Worker]int
	bookings map[string]*policy.Booking
	// generated is each booked request's generated tokens reported so
	// far, with output tracking on; hints gives requests their expected
	// output length.
	generated map[string]int
	hints     bool
	sc        policy.Scratch
	now       time.Time
}

// newRouter builds the decision path the way a router node configures its
// own, from the simulation's configuration.
func newRouter(name string, cfg Config, infos []routing.WorkerInfo) (*router, error) {
	r := &router{infos: infos, slot: make(map[routing.Worker]int, len(infos)),
		bookings: make(map[string]*policy.Booking), reports: make(reports),
		generated: make(map[string]int), hints: cfg.OutputHints}
	for i, in := range infos {
		r.slot[in.Worker] = i
	}
	if !cfg.NoKVEvents {
		r.idx = index.NewExact()
	}
	dc, err := r.deciderConfig(name, cfg)
	if err != nil {
		return nil, err
	}
	if r.core, err = policy.NewDecider(dc, r.idx); err != nil {
		return nil, err
	}
	if cfg.PrefillEngines > 0 {
		if r.pair, err = policy.NewDisagg(dc, r.idx); err != nil {
			return nil, err
		}
		r.pairs = make(map[string]*policy.PairBooking)
	}
	return r, nil
}

// deciderConfig maps the simulation's configuration to the Decider's, with
// the node's defaults where the simulation has no knob.
func (r *router) deciderConfig(name string, cfg Config) (policy.DeciderConfig, error) {
	dc := policy.DeciderConfig{Policy: name, Seed: cfg.Seed, Thresholds: cfg.Thresholds, BlockSize: cfg.BlockSize,
		Options:         policy.DefaultOptions(nil),
		ApproximateMode: cfg.NoKVEvents, ApproxPolicy: cfg.ApproxPolicy, PredictTTL: cfg.PredictTTL,
		MaxRequestAge: load.DefaultMaxRequestAge, AffinityMode: cfg.AffinityMode, MaxSessions: cfg.MaxSessions,
		Tracking: policy.Tracking{OutputBlocks: cfg.TrackOutputBlocks, OutputDecay: cfg.OutputDecay},
		Now:      func() time.Time { return r.now }}
	dc.Options.KV, dc.Options.KVTTFT = *cfg.KV, *cfg.KVTTFT
	if !cfg.NoLoadReports {
		dc.Reports = r.reports
	}
	if cfg.AffinityTTL > 0 {
		b, err := policy.NewMemBindings(policy.MemConfig{TTL: cfg.AffinityTTL, MaxSessions: cfg.MaxSessions})
		if err != nil {
			return dc, err
		}
		dc.Bindings = b
	}
	return dc, nil
}

// routed is what the replay learns from one decision.
type routed struct {
	// slot is the chosen engine's slot.
	slot int
	// took is how long the decision (candidates, matching, load
	// projection and selection) took on the wall clock.
	took time.Duration
	// best and chosen are the longest cached prefix, in blocks, that the
	// router saw on any candidate and on the chosen one.
	best, chosen int
}

// route picks an engine for p and books the request on it.
func (r *router) route(id string, p *Prompt, now time.Time) (routed, error) {
	start := time.Now()
	r.now = now
	q := policy.Query{ID: id, Ranks: r.infos, ISLTokens: p.InputTokens, SessionKey: p.Session}
	if r.hints {
		q.OutputTokens = p.OutputTokens
	}
	if err := r.core.Candidates(&r.sc, &q, now); err != nil {
		return routed{}, err
	}
	r.sc.Hashes = p.Hashes
	r.core.Match(&r.sc)
	ch, err := r.core.Choose(context.Background(), &r.sc, &q)
	if err != nil {
		return routed{}, err
	}
	out := routed{took: time.Since(start), slot: r.slot[ch.Worker], chosen: ch.CachedBlocks}
	for _, c := range r.sc.Candidates() {
		out.best = max(out.best, int(c.Overlap.Device))
	}
	b, err := r.core.Book(context.Background(), &r.sc, &q, &ch)
	if err != nil {
		return routed{}, fmt.Errorf("booking %s: %w", id, err)
	}
	r.sc.Hashes = nil // the prompt's, not the scratch's to reuse
	r.bookings[id] = &b
	return out, nil
}

// firstToken reports a request's first token at now.
func (r *router) firstToken(id string, now time.Time) {
	if b := r.bookings[id]; b != nil {
		r.now = now
		b.FirstToken(context.Background())
	}
}

// output reports that a request has generated total tokens at now, as a
// node's frontend reports streamed chunks: to its booking, or to its
// decode hop's in a disaggregated replay.
func (r *router) output(id string, total int, now time.Time) {
	b := r.bookings[id]
	if pb := r.pairs[id]; b == nil && pb != nil {
		b = &pb.Decode
	}
	if b == nil || total <= r.generated[id] {
		return
	}
	r.now = now
	b.OutputTokens(total - r.generated[id])
	r.generated[id] = total
}

// done reports a request's completion at now.
func (r *router) done(id string, now time.Time) {
	if b := r.bookings[id]; b != nil {
		r.now = now
		b.Done(context.Background(), policy.Succeeded)
		delete(r.bookings, id)
		delete(r.generated, id)
	}
}

// reports are the engines' load reports as a router node holds them: the
// last heartbeat of each engine.
type reports map[routing.Worker]routing.Load

var _ policy.LoadReporter = reports(nil)

// Load implements policy.LoadReporter.
func (r reports) Load(w routing.Worker) (routing.Load, bool) {
	l, ok := r[w]
	return l, ok
}
