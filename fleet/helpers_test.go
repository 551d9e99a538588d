package fleet

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/wire"
)

const testDC = "dc1"

// startNATS runs an embedded server on a random port for the test.
func startNATS(tb testing.TB) *server.Server {
	tb.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		tb.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		tb.Fatal("nats server not ready")
	}
	tb.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func connect(tb testing.TB, ns *server.Server) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a started plane over an embedded server with its own index.
type fixture struct {
	ns    *server.Server
	nc    *nats.Conn
	idx   *index.Exact
	plane *Plane
	clock *clock
}

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	f := &fixture{ns: startNATS(t), idx: index.NewExact(), clock: newClock()}
	f.nc = connect(t, f.ns)
	cfg := Config{DC: testDC, Now: f.clock.Now, SweepInterval: 10 * time.Millisecond,
		SnapshotTimeout: 200 * time.Millisecond, SnapshotBackoff: 10 * time.Millisecond}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg, f.nc, f.idx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	f.plane = p
	return f
}

// eventually polls cond until it holds; ten seconds is its failure bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waittest.Until(t, 10*time.Second, what, cond)
}

// engine is a fake engine process: mocker ranks that publish their events
// on NATS and answer snapshot requests with their Dump.
type engine struct {
	t           *testing.T
	nc          *nats.Conn
	id          routing.WorkerID
	incarnation uint64
	rng         *rand.Rand

	mu        sync.Mutex
	ranks     []*mocker.Engine
	vt        time.Time
	drop      int  // batches still to drop (simulated loss)
	mute      bool // drop every batch (a lost tail)
	prompts   [][]uint32
	snapshots atomic.Int64
	sub       *nats.Subscription
}

var engineCfg = mocker.Config{BlockSize: 4, NumBlocks: 64, MaxNumBatchedTokens: 256, MaxNumSeqs: 4}

func newFakeEngine(t *testing.T, nc *nats.Conn, id routing.WorkerID, ranks int, incarnation uint64) *engine {
	t.Helper()
	e := &engine{t: t, nc: nc, id: id, incarnation: incarnation, rng: rand.New(rand.NewPCG(uint64(id), incarnation)),
		vt: time.Unix(0, 0)}
	for r := range ranks {
		m, err := mocker.New(engineCfg, routing.Worker{ID: id, Rank: uint32(r)})
		if err != nil {
			t.Fatal(err)
		}
		e.ranks = append(e.ranks, m)
	}
	sub, err := nc.Subscribe(fmt.Sprintf("kvr.%s.snapshot.%d.*", testDC, id), e.serveSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	e.sub = sub
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return e
}

func (e *engine) card() *kvrpb.WorkerCard {
	return &kvrpb.WorkerCard{EngineId: uint64(e.id), DpSize: uint32(len(e.ranks)), Model: "m",
		BlockSize: uint32(engineCfg.BlockSize), TotalKvBlocks: uint64(engineCfg.NumBlocks), MaxNumBatchedTokens: 256,
		EndpointUrl: fmt.Sprintf("http://127.0.0.1:%d", 9000+e.id), Checksum: "c1", Incarnation: e.incarnation, Version: 1}
}

func (e *engine) publish(subject string, m proto.Message) {
	e.t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.nc.Publish(subject, data); err != nil {
		e.t.Fatal(err)
	}
}

func (e *engine) register() { e.publish(kvrpb.SubjectRegister(testDC, uint64(e.id)), e.card()) }

func (e *engine) heartbeat() {
	e.mu.Lock()
	hb := &kvrpb.Heartbeat{EngineId: uint64(e.id), CardChecksum: "c1", Incarnation: e.incarnation}
	for r, m := range e.ranks {
		l := m.Load()
		hb.Loads = append(hb.Loads, &kvrpb.RankLoad{Rank: uint32(r), Waiting: uint32(l.Waiting), Running: uint32(l.Running),
			ActivePrefillTokens: uint64(l.ActivePrefillTokens), LastEventId: m.LastEventID()})
	}
	e.mu.Unlock()
	e.publish(kvrpb.SubjectHeartbeat(testDC, uint64(e.id)), hb)
}

// run submits n prompts to every rank, drives the ranks to completion and
// publishes their events, one batch per Advance.
func (e *engine) run(n int) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range n {
		p := e.prompt()
		for r, m := range e.ranks {
			req := mocker.Request{ID: fmt.Sprintf("%d-%d-%d", len(e.prompts), r, i), Tokens: p, MaxTokens: 2}
			if err := m.Submit(req, e.vt); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	for r, m := range e.ranks {
		for {
			next, ok := m.NextEventTime()
			if !ok {
				break
			}
			if next.After(e.vt) {
				e.vt = next
			}
			e.send(uint32(r), m.Advance(e.vt).Events)
		}
	}
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
}

// prompt draws a prompt: one of three shared 2-block prefixes and a
// random tail, so stored events have parents and the small cache evicts.
func (e *engine) prompt() []uint32 {
	p := make([]uint32, 0, 6*engineCfg.BlockSize)
	pre := e.rng.IntN(3)
	for i := range 2 * engineCfg.BlockSize {
		p = append(p, uint32(pre*1000+i))
	}
	for range 2 + e.rng.IntN(4) {
		p = append(p, e.rng.Uint32()%50000)
	}
	for len(p)%engineCfg.BlockSize != 0 {
		p = append(p, e.rng.Uint32()%50000)
	}
	e.prompts = append(e.prompts, p)
	return p
}

// send publishes one batch unless a loss is scheduled.
func (e *engine) send(rank uint32, events []routing.Event) {
	if len(events) == 0 {
		return
	}
	if e.mute {
		return
	}
	if e.drop > 0 {
		e.drop--
		return
	}
	w := routing.Worker{ID: e.id, Rank: rank}
	e.publish(kvrpb.SubjectKV(testDC, uint64(e.id), rank), wire.EncodeBatch(w, e.incarnation, events))
}

func (e *engine) serveSnapshot(m *nats.Msg) {
	var req kvrpb.SnapshotRequest
	if err := proto.Unmarshal(m.Data, &req); err != nil {
		return
	}
	e.snapshots.Add(1)
	e.mu.Lock()
	reply := &kvrpb.SnapshotReply{EngineId: req.EngineId, Rank: req.Rank, Incarnation: e.incarnation}
	if int(req.Rank) < len(e.ranks) {
		d := e.ranks[req.Rank].Dump()
		reply.LastEventId = d.LastEventID
		for i := range d.Events {
			reply.Events = append(reply.Events, wire.EncodeEvent(&d.Events[i]))
		}
	} else {
		reply.Error = "unknown rank"
	}
	e.mu.Unlock()
	data, _ := proto.Marshal(reply)
	_ = m.Respond(data)
}

// lastIDs returns each rank's last event id.
func (e *engine) lastIDs() []uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]uint64, len(e.ranks))
	for r, m := range e.ranks {
		out[r] = m.LastEventID()
	}
	return out
}

// caughtUp reports whether the index cursor of every rank reached the
// engine's last event id.
func (f *fixture) caughtUp(e *engine) bool {
	for r, last := range e.lastIDs() {
		if cur, ok := f.idx.Cursor(routing.Worker{ID: e.id, Rank: uint32(r)}); !ok || cur != last {
			return false
		}
	}
	return true
}

// assertMirrors checks that the index answers every prompt the engine saw
// exactly as an index built from the engine's real cache does.
func assertMirrors(t *testing.T, idx *index.Exact, e *engine) {
	t.Helper()
	ref := index.NewExact()
	e.mu.Lock()
	for r, m := range e.ranks {
		d := m.Dump()
		if err := ref.ReplaceWorker(routing.Worker{ID: e.id, Rank: uint32(r)}, d.Events, d.LastEventID); err != nil {
			t.Fatal(err)
		}
	}
	prompts := e.prompts
	e.mu.Unlock()
	held := 0
	for _, p := range prompts {
		ls, err := routing.LocalHashes(nil, p, engineCfg.BlockSize, routing.HashSeed)
		if err != nil {
			t.Fatal(err)
		}
		hs := routing.SeqHashes(nil, ls)
		got, want := filter(idx.FindMatches(hs, nil), e.id), ref.FindMatches(hs, nil)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("prompt %v: index %v, engine %v", p[:8], got, want)
		}
		held += len(want)
	}
	if held == 0 {
		t.Fatal("engine holds none of its prompts; the comparison is vacuous")
	}
}

func filter(ms []routing.Match, id routing.WorkerID) []routing.Match {
	out := ms[:0:0]
	for _, m := range ms {
		if m.Worker.ID == id {
			out = append(out, m)
		}
	}
	return out
}
