package fleet

import "testing"

// TestRouterConfigVersion: the version moves when a cohort forms or
// empties (an incumbent may change), not on duplicate discovery.
func TestRouterConfigVersion(t *testing.T) {
	sets := NewWorkerSets(nil)
	v0 := sets.RouterConfigVersion()
	sets.Observe(setCard(1, "A", map[string]string{"router_mode": "kv"}))
	v1 := sets.RouterConfigVersion()
	sets.Observe(setCard(1, "A", map[string]string{"router_mode": "kv"}))
	sets.Observe(setCard(3, "A", map[string]string{"router_mode": "kv"}))
	if v1 == v0 || sets.RouterConfigVersion() != v1 {
		t.Fatalf("versions %d, %d, %d: want a change on reservation only", v0, v1, sets.RouterConfigVersion())
	}
	sets.Observe(setCard(2, "B", map[string]string{"router_mode": "random"}))
	v2 := sets.RouterConfigVersion()
	sets.Leave(1, 1)
	sets.Leave(3, 1)
	if v2 == v1 || sets.RouterConfigVersion() == v2 {
		t.Fatal("a new cohort or a succession left the version as it was")
	}
	if cfg, ok := sets.RouterConfig("m"); !ok || cfg["router_mode"] != "random" {
		t.Fatalf("after succession: %v", cfg)
	}
}
