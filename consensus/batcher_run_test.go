package consensus

import (
	"context"
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// bigEvents are stored events of blocks blocks each (chained within the
// event), ids from first.
func bigEvents(w routing.Worker, first uint64, events, blocks int) []routing.Event {
	out := make([]routing.Event, events)
	for e := range out {
		ev := routing.Event{Worker: w, ID: first + uint64(e), Kind: routing.EventStored, Tier: routing.TierDevice}
		for b := range blocks {
			h := uint64(e)<<32 | uint64(b) + 1
			ev.Blocks = append(ev.Blocks, routing.StoredBlock{Engine: routing.EngineHash(h), Local: routing.LocalHash(h)})
		}
		out[e] = ev
	}
	return out
}

// TestAddRunSplitsByBytes: a run whose events are few but large is cut
// into batches that each fit an entry, all of which apply; an event that
// alone exceeds an entry is refused with ErrEventTooLarge and the events
// before it are queued.
func TestAddRunSplitsByBytes(t *testing.T) {
	c := newCluster(t, 1)
	n := c.nodes[c.leader()]
	b := NewBatcher(n, BatcherConfig{EntryBytes: 16 << 10, BacklogBytes: 1 << 22})
	w := routing.Worker{ID: 1}
	tests := []struct {
		name     string
		events   []routing.Event
		queued   int
		tooLarge bool
	}{
		{name: "many blocks per event", events: bigEvents(w, 1, 8, 400), queued: 8},
		{name: "an event over an entry", events: append(bigEvents(w, 9, 2, 100), bigEvents(w, 11, 1, 6000)...), queued: 2, tooLarge: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := b.AddRun(tc.events)
			if k != tc.queued || errors.Is(err, ErrEventTooLarge) != tc.tooLarge || (err != nil) != tc.tooLarge {
				t.Fatalf("AddRun = %d, %v; want %d queued, too large %v", k, err, tc.queued, tc.tooLarge)
			}
			if tc.tooLarge && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("ErrEventTooLarge does not wrap ErrTooLarge: %v", err)
			}
			for _, data := range b.pending {
				if len(data) > b.cfg.EntryBytes {
					t.Fatalf("a batch of %d bytes over the entry's %d", len(data), b.cfg.EntryBytes)
				}
			}
			if _, err := b.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	if cur, _ := n.FSM().Cursor(w); cur != 10 {
		t.Fatalf("cursor %d after the runs, want 10", cur)
	}
}
