package mocker

import (
	"slices"
	"testing"
)

// TestEachRunning: a running request's generated tokens grow one per
// iteration, and a finished request leaves the running set.
func TestEachRunning(t *testing.T) {
	e := newTestEngine(t, Config{})
	if err := e.Submit(hashed("a", 1, 100, 5, 64), t0); err != nil {
		t.Fatal(err)
	}
	var seen []int
	for {
		at, busy := e.NextEventTime()
		if !busy {
			break
		}
		e.Advance(at)
		e.EachRunning(func(id string, n int) {
			if id != "a" {
				t.Fatalf("running %q", id)
			}
			seen = append(seen, n)
		})
	}
	// None while the prefill runs, then one token per iteration; the
	// fifth finishes the request, which then is no longer running.
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(seen, want) {
		t.Fatalf("generated counts after each Advance %v, want %v", seen, want)
	}
}
