package fleet

import (
	"testing"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// TestDisaggPlaneRoles: over NATS, an engine's card registers its role;
// a card with an unknown worker type is counted as malformed and
// registers nothing, and the plane goes on serving the others.
func TestDisaggPlaneRoles(t *testing.T) {
	f := newFixture(t, nil)
	bad := newFakeEngine(t, f.nc, 7, 1, 1)
	c := bad.card()
	c.WorkerType = "decoder"
	bad.publish(kvrpb.SubjectRegister(testDC, 7), c)
	eventually(t, "malformed card counted", func() bool { return f.plane.Stats().Malformed == 1 })
	if _, ok := f.plane.Registry().Engine(7); ok {
		t.Fatal("a card with an unknown worker type registered its engine")
	}
	good := newFakeEngine(t, f.nc, 8, 1, 1)
	c = good.card()
	c.WorkerType, c.BootstrapPort = "prefill", 8998
	good.publish(kvrpb.SubjectRegister(testDC, 8), c)
	eventually(t, "prefill engine registered", func() bool {
		ws := f.plane.Registry().Workers(c.Model)
		return len(ws) == 1 && ws[0].Role == routing.RolePrefill
	})
	if port, _ := f.plane.Registry().BootstrapPort(8); port != 8998 {
		t.Fatalf("bootstrap port %d", port)
	}
}
