package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// Disagg is the decision path of a disaggregated model (Layout.Serving
// says when): a prefill stage that chooses the rank computing the
// prompt's KV cache, by cached prefix and prefill load, and a decode stage
// that chooses the rank generating the answer, by decode load, among the
// decode ranks in the prefill rank's transfer domain. Each stage is a
// Decider with its own bookings and suspects, configured as the reference
// router configures its two routers (PrefillStage, DecodeStage). Session
// bindings live in the decode stage only: they pin the decode rank, while
// the prefill rank follows the cache. The router node and the simulator
// both run it.
//
// A request goes through Candidates, then (once the caller has hashed the
// prompt into DisaggScratch.Prefill.Hashes at its BlockSize) Match,
// Choose and Book, as an aggregated one goes through a Decider; the
// PairBooking ends it, one hop at a time.
//
// Concurrency: as Decider's.
type Disagg struct {
	prefill, decode *Decider
}

// NewDisagg builds the two stages from an aggregated configuration cfg,
// over the same exact index (which only the prefill stage reads).
func NewDisagg(cfg DeciderConfig, exact *index.Exact) (*Disagg, error) {
	p, err := NewDecider(PrefillStage(cfg), exact)
	if err != nil {
		return nil, fmt.Errorf("prefill stage: %w", err)
	}
	d, err := NewDecider(DecodeStage(cfg), exact)
	if err != nil {
		return nil, fmt.Errorf("decode stage: %w", err)
	}
	return &Disagg{prefill: p, decode: d}, nil
}

// decodeStream separates the decode stage's random numbers from the
// prefill stage's, so that one seed drives both without correlating them.
const decodeStream = 0x6465636f6465

// PrefillStage is the prefill stage's configuration derived from an
// aggregated one: no session bindings (they pin the decode rank) and no
// active-block tracking (track_active_blocks off: a prefill rank hands its
// blocks off and decodes nothing), everything else as configured.
func PrefillStage(c DeciderConfig) DeciderConfig {
	c.Bindings = nil
	c.Tracking.NoActiveBlocks = true
	return c
}

// DecodeStage is the decode stage's configuration derived from an
// aggregated one, as the reference router forces it: no cache credit
// (overlap_score_credit 0, and none for the host, disk and shared tiers:
// the decode rank receives the prompt's cache, so chasing its own would
// only concentrate load), no KV reuse assumed (assume_kv_reuse off: the
// transferred blocks are the request's own) and no prefill tokens
// tracked (track_prefill_tokens off). It keeps the session bindings.
func DecodeStage(c DeciderConfig) DeciderConfig {
	kv := &c.Options.KV
	kv.OverlapScoreCredit, kv.OverlapScoreCreditDecay, kv.HostCacheHitWeight, kv.DiskCacheHitWeight = 0, 0, 0, 0
	kv.SharedCacheMultiplier, kv.TrackPrefillTokens = 0, false
	c.Tracking.NoKVReuse, c.Tracking.NoPrefillTokens = true, true
	c.PredictTTL = 0
	c.Seed ^= decodeStream
	return c
}

// Prefill is the prefill stage.
func (g *Disagg) Prefill() *Decider { return g.prefill }

// Decode is the decode stage.
func (g *Disagg) Decode() *Decider { return g.decode }

// RemoveWorker forgets a rank that left the fleet, in both stages.
func (g *Disagg) RemoveWorker(w routing.Worker) {
	g.prefill.RemoveWorker(w)
	g.decode.RemoveWorker(w)
}

// DisaggScratch is one disaggregated decision's reusable memory.
type DisaggScratch struct {
	// Prefill is the prefill stage's scratch: after Candidates the caller
	// hashes the prompt into Prefill.Hashes (and TrackHashes) at
	// Prefill.BlockSize(), as for an aggregated decision.
	Prefill Scratch
	// Decode is the decode stage's scratch.
	Decode Scratch

	layout         Layout
	pranks, dranks []routing.WorkerInfo
	pq, dq         Query
}

// Pair is the two ranks Choose picked, before booking.
type Pair struct {
	Prefill, Decode Choice
}

// Candidates splits q's ranks by role and keeps, as the prefill stage's
// candidates, the prefill ranks that can hand a cache off to some allowed
// decode rank (and, for a session bound to a decode rank, to that one).
// It fails with ErrNoPrefillWorker when none is left.
func (g *Disagg) Candidates(ctx context.Context, ds *DisaggScratch, q *Query, now time.Time) error {
	ds.layout.Split(q.Ranks)
	ds.dranks = allowedRanks(ds.dranks[:0], ds.layout.Decode, q)
	ds.pranks = reachable(ds.pranks[:0], ds.layout.Prefill, ds.dranks)
	if domain, ok := g.boundDomain(ctx, ds, q, now); ok {
		ds.dranks = inDomain(ds.dranks[:0], ds.pranks, domain)
		ds.pranks = append(ds.pranks[:0], ds.dranks...)
	}
	ds.pq = *q
	ds.pq.Ranks, ds.pq.SessionKey, ds.pq.SessionFinal, ds.pq.Selector = ds.pranks, "", false, nil
	ds.pq.Pin, ds.pq.PrefillPin = q.PrefillPin, nil
	ds.pq.Allowed = prefillAllowed(q.Allowed, ds.layout.Prefill)
	// The prefill hop generates one token (max_tokens 1).
	ds.pq.OutputTokens = 1
	if err := g.prefill.Candidates(&ds.Prefill, &ds.pq, now); err != nil {
		// A pinned prefill engine that is unavailable leaves the request
		// unserved, not the model without a prefill stage.
		if errors.Is(err, ErrNoCompatibleWorker) && q.PrefillPin == nil {
			return fmt.Errorf("%w: %w", ErrNoPrefillWorker, err)
		}
		return err
	}
	return nil
}

// allowedRanks appends to dst the ranks of from that q allows.
func allowedRanks(dst, from []routing.WorkerInfo, q *Query) []routing.WorkerInfo {
	for _, in := range from {
		if q.allows(in.Worker.ID) {
			dst = append(dst, in)
		}
	}
	return dst
}

// prefillAllowed is the prefill stage's share of an allowed set: the set
// itself when it names one of the prefill ranks, else nil (every prefill
// rank). A set that names no prefill engine speaks of the engines a
// gateway sends requests to, the decode engines; the prefill hop goes
// from the decode engine to its prefill engine, not through the gateway.
// A set that names some speaks of them too, and keeps the others out.
func prefillAllowed(allowed []routing.WorkerID, prefill []routing.WorkerInfo) []routing.WorkerID {
	for i := range prefill {
		if slices.Contains(allowed, prefill[i].Worker.ID) {
			return allowed
		}
	}
	return nil
}

// boundDomain is the transfer domain of the decode rank q's session is
// bound to, when it reports one: the prefill rank must be able to reach
// it, or the binding would move with every prefill placement. A failed
// lookup is left to the decode stage's own, which reports it; a bound
// rank outside the allowed set constrains nothing, since the decode
// stage moves the session off it.
func (g *Disagg) boundDomain(ctx context.Context, ds *DisaggScratch, q *Query, now time.Time) (string, bool) {
	b := g.decode.cfg.Bindings
	if b == nil || q.SessionKey == "" || q.Pin != nil {
		return "", false
	}
	bound, ok, err := b.Lookup(ctx, q.SessionKey, now)
	if err != nil || !ok || !q.allows(bound.Worker.ID) {
		return "", false
	}
	for _, in := range ds.layout.Decode {
		if in.Worker == bound.Worker {
			return in.TransferDomain, in.TransferDomain != ""
		}
	}
	return "", false
}

// Match finds the prefill candidates' cached prefixes. The decode stage
// gives the cache no credit, so it matches nothing.
func (g *Disagg) Match(ds *DisaggScratch) { g.prefill.Match(&ds.Prefill) }

// Choose picks the prefill rank (cached prefix against prefill load),
// then the decode rank among those in its transfer domain: the session's
// bound rank, or the least costly by decode load. The decode stage sees
// the request's pin, session and thresholds; the prefill stage its
// prefill pin, thresholds and overlap credit.
func (g *Disagg) Choose(ctx context.Context, ds *DisaggScratch, q *Query) (Pair, error) {
	var p Pair
	var err error
	if p.Prefill, err = g.prefill.Choose(ctx, &ds.Prefill, &ds.pq); err != nil {
		return Pair{}, err
	}
	domain := ds.Prefill.cands[p.Prefill.index].Info.TransferDomain
	ds.dranks = inDomain(ds.dranks[:0], ds.layout.Decode, domain)
	ds.dq = *q
	// The request's cache overrides would undo DecodeStage's; its
	// temperature still applies.
	ds.dq.Ranks, ds.dq.Selector, ds.dq.Overrides = ds.dranks, nil, Overrides{Temperature: q.Overrides.Temperature}
	if err := g.decode.Candidates(&ds.Decode, &ds.dq, ds.Prefill.plan.now); err != nil {
		return Pair{}, err
	}
	if bs := ds.Decode.BlockSize(); bs != ds.Prefill.BlockSize() {
		return Pair{}, fmt.Errorf("%w: decode ranks have block size %d, prefill ranks %d", ErrNoCompatibleWorker, bs, ds.Prefill.BlockSize())
	}
	if p.Decode, err = g.decode.Choose(ctx, &ds.Decode, &ds.dq); err != nil {
		return Pair{}, err
	}
	return p, nil
}

// PairBooking is a booked disaggregated request: each hop's booking,
// ended by its own hop.
type PairBooking struct {
	Prefill, Decode Booking
}

// Book books both hops of p; the prefill hop books the prompt's prefill
// on its rank, the decode hop its blocks on its own and holds the
// session's binding.
func (g *Disagg) Book(ctx context.Context, ds *DisaggScratch, p *Pair) (PairBooking, error) {
	pb, err := g.prefill.Book(ctx, &ds.Prefill, &ds.pq, &p.Prefill)
	if err != nil {
		return PairBooking{}, err
	}
	db, err := g.decode.Book(ctx, &ds.Decode, &ds.dq, &p.Decode)
	if err != nil {
		pb.Done(ctx, Failed)
		return PairBooking{}, err
	}
	return PairBooking{Prefill: pb, Decode: db}, nil
}

// Booked is the number of active bookings of both stages.
func (g *Disagg) Booked() int { return g.prefill.Booked() + g.decode.Booked() }

// Settle ends a pair that is not booked (a selection whose caller sends
// both hops itself), as Decider.Settle ends one choice: each stage records
// its decision, and the decode stage settles the session.
func (g *Disagg) Settle(ctx context.Context, ds *DisaggScratch, p *Pair) {
	g.prefill.Settle(ctx, &ds.Prefill, &p.Prefill)
	g.decode.Settle(ctx, &ds.Decode, &p.Decode)
}
