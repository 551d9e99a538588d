package policy

import (
	"context"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// rigBlockSize is the block size of the Decider tests: small, so that a
// prompt of a few blocks is a few tokens.
const rigBlockSize = 4

// rig drives a Decider as the router node does, on a fake clock, over a
// fixed fleet.
type rig struct {
	t     *testing.T
	d     *Decider
	exact *index.Exact
	ranks []routing.WorkerInfo
	now   time.Time
	sc    Scratch
}

// rigClock is a fixed clock for Deciders built outside a rig.
func rigClock() time.Time { return time.Unix(1_700_000_000, 0) }

// newRig builds a Decider from cfg (its clock, block size and seed are
// the rig's) over ranks of capacity blocks each, engine ids 1..n.
func newRig(t *testing.T, cfg DeciderConfig, n, capacity int) *rig {
	t.Helper()
	r := &rig{t: t, now: time.Unix(1_700_000_000, 0)}
	for i := range n {
		r.ranks = append(r.ranks, routing.WorkerInfo{Worker: routing.Worker{ID: routing.WorkerID(i + 1)},
			Model: "m", BlockSize: rigBlockSize, TotalBlocks: capacity})
	}
	if !cfg.ApproximateMode {
		r.exact = index.NewExact()
	}
	cfg.Now, cfg.BlockSize, cfg.Seed = func() time.Time { return r.now }, rigBlockSize, 1
	if cfg.Policy == "" {
		cfg.Policy = NameKV
		cfg.Options = DefaultOptions(nil)
	}
	d, err := NewDecider(cfg, r.exact)
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	return r
}

// prompt returns the tokens of a prompt of blocks complete blocks whose
// tokens all are tok, so that prompts of different tok share nothing.
func prompt(tok uint32, blocks int) []uint32 {
	out := make([]uint32, blocks*rigBlockSize)
	for i := range out {
		out[i] = tok
	}
	return out
}

// route decides and books request id for tokens (pinned to engine pin
// when it is not 0) and returns the chosen worker and the booking.
func (r *rig) route(id string, tokens []uint32, pin routing.WorkerID, osl int) (routing.Worker, Booking) {
	r.t.Helper()
	q := &Query{ID: id, Model: "m", Ranks: r.ranks, ISLTokens: len(tokens), OutputTokens: osl}
	if pin != 0 {
		q.Pin = &Pin{Worker: pin}
	}
	if err := r.d.Candidates(&r.sc, q, r.now); err != nil {
		r.t.Fatal(err)
	}
	var err error
	if r.sc.Hashes, err = routing.BlockHashes(r.sc.Hashes[:0], tokens, rigBlockSize, routing.Seed("", "")); err != nil {
		r.t.Fatal(err)
	}
	r.d.Match(&r.sc)
	ch, err := r.d.Choose(context.Background(), &r.sc, q)
	if err != nil {
		r.t.Fatal(err)
	}
	b, err := r.d.Book(context.Background(), &r.sc, q, &ch)
	if err != nil {
		r.t.Fatal(err)
	}
	return ch.Worker, b
}

// serve routes a request and completes it at once.
func (r *rig) serve(id string, tokens []uint32, pin routing.WorkerID) routing.Worker {
	r.t.Helper()
	w, b := r.route(id, tokens, pin, 0)
	b.FirstToken(context.Background())
	b.Done(context.Background(), Succeeded)
	return w
}

// held is the device depth worker id's prompt has in the approximate
// index (0 when it holds none).
func (r *rig) held(tokens []uint32, id routing.WorkerID) int32 {
	r.t.Helper()
	hs, err := routing.BlockHashes(nil, tokens, rigBlockSize, routing.Seed("", ""))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range r.d.Approx().FindMatches(hs, r.now, nil) {
		if m.Worker.ID == id {
			return m.Device
		}
	}
	return 0
}

// store makes engine id hold the complete blocks of tokens on tier, as
// its KV events would tell the exact index.
func (r *rig) store(id routing.WorkerID, tokens []uint32, tier routing.Tier) {
	r.t.Helper()
	locals, err := routing.LocalHashes(nil, tokens, rigBlockSize, routing.Seed("", ""))
	if err != nil {
		r.t.Fatal(err)
	}
	w := routing.Worker{ID: id}
	cursor, _ := r.exact.Cursor(w)
	ev := routing.Event{Worker: w, ID: cursor + 1, Kind: routing.EventStored, Tier: tier}
	for i, l := range locals {
		ev.Blocks = append(ev.Blocks, routing.StoredBlock{Engine: routing.EngineHash(uint64(id)<<32 | uint64(tier)<<24 | uint64(i+1)), Local: l})
	}
	if err := r.exact.Apply(&ev); err != nil {
		r.t.Fatal(err)
	}
}
