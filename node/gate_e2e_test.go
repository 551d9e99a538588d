package node_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/node"
)

// TestMinInitialEnginesHoldsRequests: with a startup gate of two engines,
// a node whose fleet counts one answers 503 and is not ready; once the
// second engine registers it serves.
func TestMinInitialEnginesHoldsRequests(t *testing.T) {
	f := startFleet(t, 1, func(c *node.Config) { c.MinInitialEngines = 2 })
	body := `{"model":"` + model + `","prompt":` + mustJSON(seq(0, 32)) + `,"max_tokens":2}`
	resp, err := http.Post(f.base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || f.node.Ready() {
		t.Fatalf("one engine of two: status %d, ready %v; want 503 and not ready", resp.StatusCode, f.node.Ready())
	}
	f.startEngine(2)
	f.waitEngines(2)
	if w, _ := f.complete(seq(0, 32)); w == "" || !f.node.Ready() {
		t.Fatalf("two engines: served by %q, ready %v", w, f.node.Ready())
	}
}
