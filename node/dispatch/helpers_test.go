package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// testBlockSize is the engines' block size in tests.
const testBlockSize = 16

// fakeEngines is a stateful registry: engines join, die and leave, and
// report loads. Per-model rank lists are rebuilt on change (copy on
// write), as the real registry is expected to do.
type fakeEngines struct {
	mu      sync.Mutex
	engines map[routing.WorkerID]*fakeEngine
	known   map[string]bool
	ranks   map[string][]routing.WorkerInfo
	loads   map[routing.Worker]routing.Load
	// urls overrides the endpoints of some engines.
	urls map[routing.WorkerID]string
	// ports are the prefill engines' bootstrap ports.
	ports map[routing.WorkerID]uint32
}

type fakeEngine struct {
	model     string
	dp        int
	blockSize int
	live      bool
	role      routing.Role
}

var _ Engines = (*fakeEngines)(nil)
var _ LoadReporter = (*fakeEngines)(nil)

func newFakeEngines() *fakeEngines {
	return &fakeEngines{engines: map[routing.WorkerID]*fakeEngine{}, known: map[string]bool{},
		ranks: map[string][]routing.WorkerInfo{}, loads: map[routing.Worker]routing.Load{}}
}

// add registers a live engine with dp ranks.
func (f *fakeEngines) add(id routing.WorkerID, model string, dp, blockSize int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.engines[id] = &fakeEngine{model: model, dp: dp, blockSize: blockSize, live: true}
	f.known[model] = true
	f.rebuild()
}

// setRole gives an engine a role in disaggregated serving.
func (f *fakeEngines) setRole(id routing.WorkerID, role routing.Role) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.engines[id].role = role
	f.rebuild()
}

// BootstrapPort implements Bootstrapper.
func (f *fakeEngines) BootstrapPort(id routing.WorkerID) (uint32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.engines[id]
	return f.ports[id], ok
}

// setLive marks an engine live or not (registered but silent).
func (f *fakeEngines) setLive(id routing.WorkerID, live bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.engines[id].live = live
	f.rebuild()
}

// remove deregisters an engine.
func (f *fakeEngines) remove(id routing.WorkerID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.engines, id)
	f.rebuild()
}

// setLoad sets a rank's reported load.
func (f *fakeEngines) setLoad(w routing.Worker, l routing.Load) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads[w] = l
}

// rebuild replaces the per-model rank lists. Callers hold mu.
func (f *fakeEngines) rebuild() {
	f.ranks = map[string][]routing.WorkerInfo{}
	ids := make([]routing.WorkerID, 0, len(f.engines))
	for id := range f.engines {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := f.engines[id]
		if !e.live {
			continue
		}
		for r := range e.dp {
			f.ranks[e.model] = append(f.ranks[e.model], routing.WorkerInfo{
				Worker: routing.Worker{ID: id, Rank: uint32(r)}, Model: e.model, BlockSize: e.blockSize,
				TotalBlocks: 4096, MaxBatchedTokens: 8192, Role: e.role})
		}
	}
}

func (f *fakeEngines) Workers(model string) ([]routing.WorkerInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ranks[model], f.known[model]
}

func (f *fakeEngines) Endpoint(id routing.WorkerID) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.engines[id]; !ok {
		return "", false
	}
	if u, ok := f.urls[id]; ok {
		return u, true
	}
	return fmt.Sprintf("http://engine-%d:8000", id), true
}

func (f *fakeEngines) Models() []Model {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Model
	for m, rs := range f.ranks {
		out = append(out, Model{ID: m, Engines: len(rs)})
	}
	slices.SortFunc(out, func(a, b Model) int { return cmpString(a.ID, b.ID) })
	return out
}

func (f *fakeEngines) Load(w routing.Worker) (routing.Load, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.loads[w]
	return l, ok
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fakeClock is an injected clock that only moves when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// feeder applies stored events to an exact index, as the event plane
// would, numbering each worker's events.
type feeder struct {
	t   testing.TB
	idx *index.Exact
	ids map[routing.Worker]uint64
	eng uint64
}

func newFeeder(t testing.TB, idx *index.Exact) *feeder {
	return &feeder{t: t, idx: idx, ids: map[routing.Worker]uint64{}}
}

// store makes w hold the complete blocks of tokens on the device.
func (f *feeder) store(w routing.Worker, tokens []uint32) {
	f.t.Helper()
	locals, err := routing.LocalHashes(nil, tokens, testBlockSize, routing.HashSeed)
	if err != nil {
		f.t.Fatal(err)
	}
	ev := routing.Event{Worker: w, Kind: routing.EventStored, Tier: routing.TierDevice}
	for _, l := range locals {
		f.eng++
		ev.Blocks = append(ev.Blocks, routing.StoredBlock{Engine: routing.EngineHash(f.eng), Local: l})
	}
	f.ids[w]++
	ev.ID = f.ids[w]
	if err := f.idx.Apply(&ev); err != nil {
		f.t.Fatal(err)
	}
}

// prompt returns n tokens starting at base: prompts with equal bases share
// their prefix.
func prompt(base uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

// concat joins token slices into a new one.
func concat(parts ...[]uint32) []uint32 {
	var out []uint32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// fixture is a dispatcher over a fake fleet.
type fixture struct {
	t       testing.TB
	d       *Dispatcher
	engines *fakeEngines
	idx     *index.Exact
	feed    *feeder
	clock   *fakeClock
	m       *metrics.Metrics
	seq     int
}

// newFixture builds n single-rank engines of model "m" (ids 1..n) and a
// dispatcher with cfg adjusted by edit.
func newFixture(t testing.TB, n int, edit func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, engines: newFakeEngines(), idx: index.NewExact(), clock: newFakeClock(), m: metrics.New()}
	for i := 1; i <= n; i++ {
		f.engines.add(routing.WorkerID(i), "m", 1, testBlockSize)
	}
	cfg := DefaultConfig()
	cfg.Now = f.clock.Now
	cfg.Seed = 7
	if edit != nil {
		edit(&cfg)
	}
	d, err := New(cfg, f.engines, f.idx, f.m, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.d, f.feed = d, newFeeder(t, f.idx)
	return f
}

// req returns a token request with a fresh id.
func (f *fixture) req(tokens []uint32) *Request {
	f.seq++
	return &Request{ID: fmt.Sprintf("r%d", f.seq), Model: "m", Tokens: tokens}
}

// route routes r and fails the test on error.
func (f *fixture) route(r *Request) *Decision {
	f.t.Helper()
	dec, err := f.d.Route(t0ctx, r)
	if err != nil {
		f.t.Fatalf("Route(%s): %v", r.ID, err)
	}
	return dec
}

// active is the booked load of w.
func (f *fixture) active(w routing.Worker) routing.Load {
	return f.d.core.Active(testBlockSize, w)
}

// w1 names rank 0 of engine id.
func w1(id routing.WorkerID) routing.Worker { return routing.Worker{ID: id} }

var t0ctx = context.Background()
