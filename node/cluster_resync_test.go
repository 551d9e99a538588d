package node

import (
	"testing"
	"time"
)

// TestResyncGate: a rank whose stream is refused again after a resync
// waits, doubling, before the next one; a clean stretch resets the wait.
func TestResyncGate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		refused bool          // an event was refused before this resync
		at      time.Duration // since t0
		ok      bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "clean gaps never wait", steps: []step{{at: 0, ok: true}, {at: 1, ok: true}, {at: 2, ok: true}}},
		{name: "first refusal resyncs at once", steps: []step{{refused: true, at: 0, ok: true}}},
		{name: "a resync that does not cure waits", steps: []step{
			{refused: true, at: 0, ok: true},
			{refused: true, at: 100 * time.Millisecond, ok: false},
			{at: 500 * time.Millisecond, ok: false},
			{at: time.Second, ok: true},
			{refused: true, at: 1500 * time.Millisecond, ok: false},
			{at: 2900 * time.Millisecond, ok: false},
			{at: 3 * time.Second, ok: true},
		}},
		{name: "a clean stretch resets", steps: []step{
			{refused: true, at: 0, ok: true},
			{refused: true, at: time.Second, ok: true},
			{at: 2 * time.Second, ok: true},
			{at: 2*time.Second + time.Millisecond, ok: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g resyncGate
			for i, s := range tc.steps {
				if s.refused {
					g.refused()
				}
				now := t0.Add(s.at)
				ok, wait := g.admit(now)
				if ok != s.ok {
					t.Fatalf("step %d at %v: admit %v (wait %v, backoff %v), want %v", i, s.at, ok, wait, g.backoff, s.ok)
				}
				if ok {
					g.done(now)
				}
			}
		})
	}
}
