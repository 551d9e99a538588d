package fleet

import (
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// An engine of protocol version 1 registers, heartbeats and deregisters
// on the shared subjects; by default the plane hears it (a rolling
// upgrade runs new routers beside old engines), and with
// RefuseV1Subjects it does not.
func TestPlaneV1Subjects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse bool
	}{
		{name: "accepted by default"},
		{name: "refused when configured", refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.RefuseV1Subjects = tc.refuse })
			e := newFakeEngine(t, f.nc, 3, 1, 4)
			e.publish(kvrpb.SubjectRegisterV1(testDC), e.card())
			if tc.refuse {
				// A v2 engine's card after the v1 one: the v1 card had
				// time to arrive (it would be on its own subscription).
				other := newFakeEngine(t, f.nc, 4, 1, 1)
				f.registered(t, other)
				if _, ok := f.plane.Registry().Engine(3); ok {
					t.Fatal("a v1 card was heard with RefuseV1Subjects")
				}
				return
			}
			eventually(t, "v1 registration", func() bool { _, ok := f.plane.Registry().Engine(3); return ok })
			f.clock.Add(time.Second)
			e.publish(kvrpb.SubjectHeartbeatV1(testDC), &kvrpb.Heartbeat{EngineId: 3, CardChecksum: "c1", Incarnation: 4})
			eventually(t, "v1 heartbeat", func() bool {
				en, ok := f.plane.Registry().Engine(3)
				return ok && en.LastSeen.Equal(f.clock.Now())
			})
			e.publish(kvrpb.SubjectDeregisterV1(testDC), &kvrpb.Deregister{EngineId: 3, Incarnation: 4})
			eventually(t, "v1 deregistration", func() bool { _, ok := f.plane.Registry().Engine(3); return !ok })
		})
	}
}
