package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// The simulator must measure the router users run: fed the same recorded
// inputs (the exact index's contents, engine load reports, sessions, the
// side index's predictions, unreachable engines, request ends), the
// node's dispatcher and the simulator's router choose the same engine for
// every request.
func TestSimRoutesAsTheNode(t *testing.T) {
	const seed, requests, engines, bs = 11, 500, 6, 16
	th := int64(12_000)
	cfg := Config{Engines: engines, BlockSize: bs, Seed: seed, PredictTTL: 2 * time.Second,
		AffinityTTL: time.Minute, AffinityMode: policy.AffinitySoft,
		Thresholds: policy.Thresholds{ActivePrefillTokens: &th}}.withDefaults()
	infos := make([]routing.WorkerInfo, engines)
	for i := range infos {
		infos[i] = routing.WorkerInfo{Worker: routing.Worker{ID: routing.WorkerID(i + 1)}, Model: "m",
			BlockSize: bs, TotalBlocks: 4096, MaxBatchedTokens: 8192}
	}
	simr, err := newRouter(policy.NameKV, cfg, infos)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1_700_000_000, 0)
	reg := &registry{infos: infos, reports: simr.reports}
	nodeIdx := index.NewExact()
	dc := dispatch.DefaultConfig()
	dc.Seed, dc.PredictTTL, dc.AffinityTTL, dc.AffinityMode = seed, cfg.PredictTTL, cfg.AffinityTTL, cfg.AffinityMode
	dc.Thresholds, dc.Now = cfg.Thresholds, func() time.Time { return clock }
	node, err := dispatch.New(dc, reg, nodeIdx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := newRecorded(t, seed, bs, engines, nodeIdx, simr.idx)
	type open struct {
		id  string
		dec *dispatch.Decision
	}
	var running []open
	refused, bound := 0, 0
	for i := range requests {
		clock = clock.Add(time.Duration(in.rng.IntN(300)) * time.Millisecond)
		in.events()
		if in.rng.IntN(8) == 0 {
			simr.reports[infos[in.rng.IntN(engines)].Worker] = routing.Load{PrefillTokens: in.rng.Int64N(9000),
				DecodeBlocks: in.rng.Int64N(3000), ActiveRequests: in.rng.Int64N(20)}
		}
		tokens, session := in.request()
		id := fmt.Sprint("r", i)
		dec, nodeErr := node.Route(context.Background(), &dispatch.Request{ID: id, Model: "m", Tokens: tokens, SessionID: session})
		hashes, _ := routing.BlockHashes(nil, tokens, bs, routing.Seed("", ""))
		rt, simErr := simr.route(id, &Prompt{InputTokens: len(tokens), Hashes: hashes, Session: session}, clock)
		if nodeErr != nil || simErr != nil {
			// Refusals must agree too: every engine busy, or suspected.
			if !errors.Is(nodeErr, dispatch.ErrOverloaded) && !errors.Is(nodeErr, dispatch.ErrNoEngine) || simErr == nil {
				t.Fatalf("request %d: node: %v; sim: %v", i, nodeErr, simErr)
			}
			refused++
			continue
		}
		if got := infos[rt.slot].Worker; got != dec.Worker {
			t.Fatalf("request %d: sim chose %v, the node %v", i, got, dec.Worker)
		}
		if dec.SessionBound {
			bound++
		}
		running = append(running, open{id, dec})
		for len(running) > 0 && in.rng.IntN(3) != 0 {
			k := in.rng.IntN(len(running))
			o := running[k]
			running = append(running[:k], running[k+1:]...)
			switch in.rng.IntN(20) {
			case 0:
				o.dec.Done(fmt.Errorf("connect: %w", dispatch.ErrEngineUnreachable))
				simr.bookings[o.id].Done(context.Background(), policy.Unreachable)
				delete(simr.bookings, o.id)
			default:
				o.dec.OnFirstToken()
				simr.firstToken(o.id, clock)
				o.dec.Done(nil)
				simr.done(o.id, clock)
			}
		}
	}
	t.Logf("seed %d: %d requests, %d refused by both, %d decided by a session binding", seed, requests, refused, bound)
	if refused > requests/10 || bound == 0 {
		t.Errorf("the inputs exercise too little: %d refused, %d bound", refused, bound)
	}
}

// registry is the node's view of the fleet in the test: the same ranks and
// the same load reports as the simulator's router.
type registry struct {
	infos   []routing.WorkerInfo
	reports reports
}

func (r *registry) Workers(string) ([]routing.WorkerInfo, bool) { return r.infos, true }
func (r *registry) Endpoint(routing.WorkerID) (string, bool)    { return "http://engine", true }
func (r *registry) Models() []dispatch.Model                    { return nil }
func (r *registry) Load(w routing.Worker) (routing.Load, bool)  { return r.reports.Load(w) }

// recorded generates the test's inputs: prompts from a few prefix families
// with sessions, and KV events applied to both indexes alike.
type recorded struct {
	t        *testing.T
	rng      *rand.Rand
	bs       int
	engines  int
	idxs     []*index.Exact
	families [][]uint32
	ids      map[routing.Worker]uint64
	eng      uint64
}

func newRecorded(t *testing.T, seed uint64, bs, engines int, idxs ...*index.Exact) *recorded {
	r := &recorded{t: t, rng: rand.New(rand.NewPCG(seed, 1)), bs: bs, engines: engines, idxs: idxs,
		ids: map[routing.Worker]uint64{}}
	for f := range 12 {
		fam := make([]uint32, 4096)
		for i := range fam {
			fam[i] = uint32(f*100_000 + i)
		}
		r.families = append(r.families, fam)
	}
	return r
}

// request returns a prompt (a family's prefix and a unique tail) and its
// session, if any.
func (r *recorded) request() ([]uint32, string) {
	fam := r.families[r.rng.IntN(len(r.families))]
	n := 64 + r.rng.IntN(2048)
	tokens := append([]uint32(nil), fam[:n]...)
	for range r.rng.IntN(256) {
		tokens = append(tokens, 1_000_000+r.rng.Uint32N(1000))
	}
	session := ""
	if r.rng.IntN(3) == 0 {
		session = fmt.Sprint("s", r.rng.IntN(10))
	}
	return tokens, session
}

// events stores, now and then, a family's prefix on an engine in both
// indexes, as the engines' KV events would.
func (r *recorded) events() {
	if r.rng.IntN(4) != 0 {
		return
	}
	w := routing.Worker{ID: routing.WorkerID(1 + r.rng.IntN(r.engines))}
	fam := r.families[r.rng.IntN(len(r.families))]
	locals, _ := routing.LocalHashes(nil, fam[:r.bs*(1+r.rng.IntN(200))], r.bs, routing.HashSeed)
	ev := routing.Event{Worker: w, Kind: routing.EventStored, Tier: routing.TierDevice}
	for _, l := range locals {
		r.eng++
		ev.Blocks = append(ev.Blocks, routing.StoredBlock{Engine: routing.EngineHash(r.eng), Local: l})
	}
	r.ids[w]++
	ev.ID = r.ids[w]
	for _, idx := range r.idxs {
		e := ev
		if err := idx.Apply(&e); err != nil {
			r.t.Fatal(err)
		}
	}
}
