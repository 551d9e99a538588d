package fleet

import (
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// removals records OnRemove calls.
type removals struct {
	mu   sync.Mutex
	seen []Engine
}

func (r *removals) add(e Engine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, e)
}

func (r *removals) list() []Engine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Engine(nil), r.seen...)
}

// registered waits until the engine is registered and every rank's initial
// snapshot has been applied.
func (f *fixture) registered(t *testing.T, e *engine) {
	t.Helper()
	e.register()
	eventually(t, "registration and initial snapshots", func() bool {
		_, ok := f.plane.Registry().Engine(e.id)
		return ok && f.caughtUp(e)
	})
}

func TestRegistrationAndEventsFlow(t *testing.T) {
	f := newFixture(t, nil)
	e := newFakeEngine(t, f.nc, 7, 2, 1)
	f.registered(t, e)
	engines := f.plane.Registry().Engines()
	if len(engines) != 1 || engines[0].ID != 7 || len(engines[0].Workers) != 2 || engines[0].Endpoint != "http://127.0.0.1:9007" {
		t.Fatalf("engines = %+v", engines)
	}
	e.run(12)
	eventually(t, "events applied", func() bool { return f.caughtUp(e) })
	assertMirrors(t, f.idx, e)
	if s := f.plane.Stats(); s.Gaps != 0 || s.Applied == 0 || s.Resyncs != 2 {
		t.Fatalf("stats = %+v, want applied events, no gaps, one initial resync per rank", s)
	}
	e.heartbeat()
	eventually(t, "heartbeat load", func() bool {
		_, ok := f.plane.Registry().Load(routing.Worker{ID: 7, Rank: 1})
		return ok && f.plane.Registry().Models()[0] == "m"
	})
}

func TestLateNodeLearnsCacheFromSnapshot(t *testing.T) {
	f := newFixture(t, nil)
	e := newFakeEngine(t, f.nc, 3, 1, 1)
	e.run(8) // published before the engine registered: dropped as unregistered
	eventually(t, "unregistered events counted", func() bool { return f.plane.Stats().Dropped > 0 })
	f.registered(t, e)
	assertMirrors(t, f.idx, e)
}

func TestGapTriggersExactlyOneResync(t *testing.T) {
	f := newFixture(t, nil)
	e := newFakeEngine(t, f.nc, 9, 1, 1)
	f.registered(t, e)
	e.run(4)
	eventually(t, "first events", func() bool { return f.caughtUp(e) })
	before := e.snapshots.Load()
	e.mu.Lock()
	e.drop = 1
	e.mu.Unlock()
	e.run(10)
	eventually(t, "resync", func() bool { return f.caughtUp(e) && f.plane.Stats().Resyncs == 2 })
	if got := e.snapshots.Load() - before; got != 1 {
		t.Fatalf("snapshot requests after the gap = %d, want 1", got)
	}
	if s := f.plane.Stats(); s.Gaps != 1 || s.ResyncErrors != 0 {
		t.Fatalf("stats = %+v, want one gap", s)
	}
	assertMirrors(t, f.idx, e)
	e.run(5)
	eventually(t, "events after the resync", func() bool { return f.caughtUp(e) })
	assertMirrors(t, f.idx, e)
}

func TestLostTailDetectedByHeartbeat(t *testing.T) {
	f := newFixture(t, nil)
	e := newFakeEngine(t, f.nc, 4, 1, 1)
	f.registered(t, e)
	e.run(4)
	eventually(t, "first events", func() bool { return f.caughtUp(e) })
	e.mu.Lock()
	e.mute = true
	e.mu.Unlock()
	e.run(3)
	e.mu.Lock()
	e.mute = false
	e.mu.Unlock()
	if f.caughtUp(e) {
		t.Fatal("muted events reached the index")
	}
	e.heartbeat()
	e.heartbeat()
	eventually(t, "tail resync", func() bool { return f.caughtUp(e) })
	if s := f.plane.Stats(); s.Gaps != 1 {
		t.Fatalf("stats = %+v, want one gap", s)
	}
	assertMirrors(t, f.idx, e)
}

// TestLivenessExpiry: an engine is removed once it was silent for the
// liveness timeout (1 s of the fixture's clock), not before. A control
// engine that last spoke 600 ms before engine 5 is removed by a sweep
// run at a time when engine 5 must stay: the sweep that removes it is
// the window of the negative assertion.
func TestLivenessExpiry(t *testing.T) {
	var gone removals
	f := newFixture(t, func(c *Config) { c.LivenessTimeout = time.Second })
	f.plane.Registry().OnRemove(gone.add)
	e := newFakeEngine(t, f.nc, 5, 2, 1)
	f.registered(t, e)
	control := newFakeEngine(t, f.nc, 9, 1, 1)
	f.registered(t, control)
	e.run(6)
	eventually(t, "events", func() bool { return f.caughtUp(e) })
	f.clock.Add(600 * time.Millisecond)
	e.heartbeat()
	eventually(t, "heartbeat", func() bool {
		en, _ := f.plane.Registry().Engine(5)
		return en.LastSeen.Equal(f.clock.Now())
	})
	f.clock.Add(600 * time.Millisecond) // control silent 1.2 s, engine 5 0.6 s
	eventually(t, "a sweep to remove the control engine", func() bool { return len(gone.list()) >= 1 })
	if got := gone.list(); len(got) != 1 || got[0].ID != 9 {
		t.Fatalf("removed %+v, want only the control engine", got)
	}
	if _, ok := f.plane.Registry().Engine(5); !ok {
		t.Fatal("engine expired although its heartbeat is within the timeout")
	}
	f.clock.Add(400 * time.Millisecond)
	eventually(t, "expiry", func() bool { return len(gone.list()) == 2 })
	if got := gone.list()[1]; got.ID != 5 || len(f.plane.Registry().Engines()) != 0 {
		t.Fatalf("removed %+v, engines %+v", got, f.plane.Registry().Engines())
	}
	eventually(t, "blocks dropped", func() bool {
		_, ok0 := f.idx.Cursor(routing.Worker{ID: 5})
		_, ok1 := f.idx.Cursor(routing.Worker{ID: 5, Rank: 1})
		return !ok0 && !ok1 && f.idx.Stats().Pairs == 0
	})
}

func TestRestartWithNewIncarnation(t *testing.T) {
	var gone removals
	f := newFixture(t, nil)
	f.plane.Registry().OnRemove(gone.add)
	old := newFakeEngine(t, f.nc, 6, 1, 1)
	f.registered(t, old)
	old.run(8)
	eventually(t, "events", func() bool { return f.caughtUp(old) })
	_ = old.sub.Unsubscribe()
	e := newFakeEngine(t, f.nc, 6, 1, 2)
	e.register()
	eventually(t, "restart", func() bool {
		en, _ := f.plane.Registry().Engine(6)
		return en.Incarnation == 2 && f.idx.Stats().Pairs == 0
	})
	if g := gone.list(); len(g) != 1 || g[0].Incarnation != 1 {
		t.Fatalf("OnRemove saw %+v, want the old incarnation", g)
	}
	old.run(2) // late events of the old incarnation are dropped
	e.run(5)
	eventually(t, "new events", func() bool { return f.caughtUp(e) })
	assertMirrors(t, f.idx, e)
}

func TestDeregister(t *testing.T) {
	var gone removals
	f := newFixture(t, nil)
	f.plane.Registry().OnRemove(gone.add)
	e := newFakeEngine(t, f.nc, 8, 1, 3)
	f.registered(t, e)
	e.publish(kvrpb.SubjectDeregister(testDC, 8), &kvrpb.Deregister{EngineId: 8, Incarnation: 2})
	e.publish(kvrpb.SubjectDeregister(testDC, 8), &kvrpb.Deregister{EngineId: 8, Incarnation: 3})
	eventually(t, "deregistration", func() bool { return len(gone.list()) == 1 })
	if len(f.plane.Registry().Engines()) != 0 {
		t.Fatal("engine still registered")
	}
}

func TestMalformedPayloadsCounted(t *testing.T) {
	f := newFixture(t, nil)
	garbage := []byte{0xff, 0xff, 0x01}
	for _, subj := range []string{kvrpb.SubjectKV(testDC, 1, 0), kvrpb.SubjectRegister(testDC, 1),
		kvrpb.SubjectHeartbeat(testDC, 1), kvrpb.SubjectDeregister(testDC, 1)} {
		if err := f.nc.Publish(subj, garbage); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "malformed counted", func() bool { return f.plane.Stats().Malformed == 4 })
	e := newFakeEngine(t, f.nc, 2, 1, 1)
	e.heartbeat() // unknown engine
	eventually(t, "refused heartbeat", func() bool { return f.plane.Stats().RefusedHeartbeats == 1 })
	f.registered(t, e)
	e.run(3)
	eventually(t, "events after garbage", func() bool { return f.caughtUp(e) })
}

func TestSnapshotFailureIsBounded(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.SnapshotAttempts = 2 })
	e := newFakeEngine(t, f.nc, 11, 1, 1)
	_ = e.sub.Unsubscribe() // no snapshot responder
	e.register()
	eventually(t, "failed resync", func() bool { return f.plane.Stats().ResyncErrors == 1 })
	e.run(3) // starts at id 1: applies without a snapshot
	eventually(t, "events", func() bool { return f.caughtUp(e) })
	if s := f.plane.Stats(); s.Resyncs != 0 || s.Gaps != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestApproximateModeSkipsEvents(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	p, err := New(Config{DC: testDC, NoKVEvents: true}, nc, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	e := newFakeEngine(t, nc, 12, 1, 1)
	e.register()
	eventually(t, "registration", func() bool { return len(p.Registry().Workers("m")) == 1 })
	e.run(2)
	ev := routing.Event{Worker: routing.Worker{ID: 12}, ID: 1, Kind: routing.EventCleared}
	e.publish(kvrpb.SubjectKV(testDC, 12, 0), wire.EncodeBatch(ev.Worker, 1, []routing.Event{ev}))
	// Once the server has the batch (Flush), it has routed it to every
	// subscriber it has: in approximate mode the plane is none, so
	// nothing can reach it later.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if ns.GlobalAccount().SubscriptionInterest(kvrpb.SubjectKV(testDC, 12, 0)) {
		t.Fatal("approximate mode subscribed to the engines' KV events")
	}
	if s := p.Stats(); s.Applied != 0 || s.Dropped != 0 || e.snapshots.Load() != 0 {
		t.Fatalf("approximate mode handled events: %+v, snapshots %d", s, e.snapshots.Load())
	}
}

func TestLifecycle(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	p, err := New(Config{DC: testDC}, nc, nil, nil, nil)
	if err == nil {
		t.Fatal("accepted a nil index with kv events on")
	}
	p, err = New(Config{DC: testDC, NoKVEvents: true}, nc, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != ErrStarted {
		t.Fatalf("second start: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != ErrClosed {
		t.Fatalf("start after close: %v", err)
	}
}
