package node

import "testing"

// TestEngineGate: the gate opens when the fleet first reaches its size and
// stays open when the fleet shrinks; a size of 0 never holds requests.
func TestEngineGate(t *testing.T) {
	engines := 0
	g := &engineGate{min: 2, count: func() int { return engines }}
	for _, step := range []struct {
		engines int
		want    bool
	}{{0, false}, {1, false}, {2, true}, {1, true}, {0, true}} {
		engines = step.engines
		if got := g.ready(); got != step.want {
			t.Fatalf("%d engines: ready %v, want %v", engines, got, step.want)
		}
	}
	if !(&engineGate{count: func() int { return 0 }}).ready() {
		t.Fatal("a gate of size 0 held requests")
	}
}
