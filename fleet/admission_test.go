package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// The registry admits engines' own cards within its limits and never over
// a declared engine; declared cards are always admitted.
func TestRegistryAdmission(t *testing.T) {
	withURL := func(c *kvrpb.WorkerCard, url string) *kvrpb.WorkerCard { c.EndpointUrl = url; return c }
	tests := []struct {
		name  string
		setup func(r *Registry)
		card  *kvrpb.WorkerCard
		src   Source
		want  error
	}{
		{"new engine", nil, card(1, "m", 1, 1, "c"), FromEngine, nil},
		{"reserved id", func(r *Registry) { r.Reserve(1, "http://static:80") }, card(1, "m", 1, 1, "c"), FromEngine, ErrDeclared},
		{"reserved url", func(r *Registry) { r.Reserve(9, "http://static:80") },
			withURL(card(1, "m", 1, 1, "c"), "http://static:80"), FromEngine, ErrDeclared},
		{"declared engine's id", func(r *Registry) { mustRegister(t, r, card(1, "m", 1, 1, "c"), FromDeclared) },
			card(1, "m", 1, 2, "c"), FromEngine, ErrDeclared},
		{"declared engine's url", func(r *Registry) { mustRegister(t, r, card(2, "m", 1, 1, "c"), FromDeclared) },
			withURL(card(1, "m", 1, 1, "c"), "http://e2:80"), FromEngine, ErrDeclared},
		{"declared card over a reservation", func(r *Registry) { r.Reserve(1, "http://e1:80") },
			card(1, "m", 1, 1, "c"), FromDeclared, nil},
		{"full", func(r *Registry) {
			r.SetLimits(Limits{MaxEngines: 1})
			mustRegister(t, r, card(2, "m", 1, 1, "c"), FromEngine)
		}, card(1, "m", 1, 1, "c"), FromEngine, ErrCapacity},
		{"full, but a restart of a known engine", func(r *Registry) {
			r.SetLimits(Limits{MaxEngines: 1})
			mustRegister(t, r, card(1, "m", 1, 1, "c"), FromEngine)
		}, card(1, "m", 1, 2, "c"), FromEngine, nil},
		{"full, declared", func(r *Registry) {
			r.SetLimits(Limits{MaxEngines: 1})
			mustRegister(t, r, card(2, "m", 1, 1, "c"), FromEngine)
		}, card(1, "m", 1, 1, "c"), FromDeclared, nil},
		{"over the rate", func(r *Registry) {
			r.SetLimits(Limits{Rate: 1, Burst: 1})
			mustRegister(t, r, card(2, "m", 1, 1, "c"), FromEngine)
		}, card(1, "m", 1, 1, "c"), FromEngine, ErrRateLimited},
		{"over the rate, but only a refresh", func(r *Registry) {
			mustRegister(t, r, card(1, "m", 1, 1, "c"), FromEngine)
			r.SetLimits(Limits{Rate: 1, Burst: 1})
			mustRegister(t, r, card(2, "m", 1, 1, "c"), FromEngine)
		}, card(1, "m", 1, 1, "c"), FromEngine, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(time.Second, nil)
			if tc.setup != nil {
				tc.setup(r)
			}
			_, err := r.RegisterFrom(tc.card, t0, tc.src)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func mustRegister(t *testing.T, r *Registry, c *kvrpb.WorkerCard, src Source) {
	t.Helper()
	if _, err := r.RegisterFrom(c, t0, src); err != nil {
		t.Fatal(err)
	}
}

// A declared engine replaces an engine's own card that claimed its id or
// endpoint, and the listeners hear the claimant removed; the claimant's
// heartbeats and deregistrations no longer count.
func TestDeclaredEvictsClaimants(t *testing.T) {
	r := NewRegistry(time.Second, nil)
	var gone []routing.WorkerID
	r.OnRemove(func(e Engine) { gone = append(gone, e.ID) })
	mustRegister(t, r, card(1, "m", 1, 1, "c"), FromEngine)
	impostor := card(2, "m", 1, 1, "c")
	impostor.EndpointUrl = "http://e1:80"
	mustRegister(t, r, card(3, "m", 1, 1, "c"), FromEngine)
	mustRegister(t, r, impostor, FromEngine)
	mustRegister(t, r, card(1, "m", 1, 7, "d"), FromDeclared)
	if len(gone) != 2 {
		t.Fatalf("removed %v, want engines 1 and 2", gone)
	}
	if e, ok := r.Engine(1); !ok || e.Source != FromDeclared || e.Incarnation != 7 {
		t.Fatalf("engine 1 = %+v", e)
	}
	hb := &kvrpb.Heartbeat{EngineId: 1, Incarnation: 7, CardChecksum: "d"}
	if err := r.Heartbeat(hb, t0, FromEngine); !errors.Is(err, ErrDeclared) {
		t.Fatalf("engine's own heartbeat for a declared engine: %v", err)
	}
	if _, ok := r.Deregister(1, 7, FromEngine); ok {
		t.Fatal("an engine's own deregistration removed a declared engine")
	}
}

// Over NATS, a card, heartbeat, deregistration or KV batch that names
// another engine than its subject is refused and counted; the named
// engine is untouched.
func TestPlaneRefusesMessagesForAnotherEngine(t *testing.T) {
	f := newFixture(t, nil)
	victim := newFakeEngine(t, f.nc, 5, 1, 11)
	f.registered(t, victim)
	forged := victim.card()
	forged.Incarnation, forged.EndpointUrl = 99, "http://impostor:1"
	victim.publish(kvrpb.SubjectRegister(testDC, 6), forged)
	victim.publish(kvrpb.SubjectDeregister(testDC, 6), &kvrpb.Deregister{EngineId: 5, Incarnation: 11})
	victim.publish(kvrpb.SubjectHeartbeat(testDC, 6), &kvrpb.Heartbeat{EngineId: 5, Incarnation: 11, CardChecksum: "c1"})
	eventually(t, "refusals counted", func() bool {
		s := f.plane.Stats().Refused
		return s["card/identity"] == 1 && s["deregister/identity"] == 1 && s["heartbeat/identity"] == 1
	})
	if e, ok := f.plane.Registry().Engine(5); !ok || e.Incarnation != 11 || e.Endpoint == "http://impostor:1" {
		t.Fatalf("victim = %+v, %v", e, ok)
	}
}

// A flood of cards of new engines adds at most the burst (plus the rate
// over the time it lasts), is counted, and leaves the real engine's
// heartbeats flowing: each is heard while the flood is still queued, and
// the engine outlives several liveness timeouts of the test clock.
func TestCardFloodIsLimitedAndHeartbeatsFlow(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.RegistrationBurst, c.RegistrationRate = 50, 1 })
	real := newFakeEngine(t, f.nc, 1, 1, 1)
	f.registered(t, real)
	const flood, steps = 5000, 20
	seed := card(0, "m", 1, 1, "c")
	for i := range flood {
		seed.EngineId = uint64(1000 + i)
		real.publish(kvrpb.SubjectRegister(testDC, seed.EngineId), seed)
	}
	for range steps {
		f.clock.Add(500 * time.Millisecond)
		real.heartbeat()
		eventually(t, "heartbeat heard", func() bool {
			e, ok := f.plane.Registry().Engine(1)
			return ok && e.LastSeen.Equal(f.clock.Now())
		})
	}
	admitted := 50 + steps/2 + 1
	eventually(t, "flood counted", func() bool {
		s := f.plane.Stats().Refused
		return s["card/rate"]+s["card/overflow"]+s["card/capacity"] >= uint64(flood-admitted)
	})
	if n := len(f.plane.Registry().Engines()); n > 1+admitted {
		t.Fatalf("%d engines registered: the flood was not limited", n)
	}
}
