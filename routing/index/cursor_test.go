package index

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

func TestCheckNext(t *testing.T) {
	cases := []struct {
		name        string
		cursor, id  uint64
		wantRestart bool
		wantErr     error
	}{
		{"first event", 0, 1, false, nil},
		{"next", 7, 8, false, nil},
		{"restart", 7, 1, true, nil},
		{"one after one is a duplicate", 1, 1, false, ErrStale},
		{"duplicate", 7, 7, false, ErrStale},
		{"older", 7, 3, false, ErrStale},
		{"gap", 7, 9, false, ErrGap},
		{"gap from nothing", 0, 2, false, ErrGap},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := &routing.Event{Worker: routing.Worker{ID: 1}, ID: tc.id}
			restart, err := CheckNext(ev, tc.cursor)
			if restart != tc.wantRestart || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("CheckNext(id %d, cursor %d) = %v, %v; want %v, %v", tc.id, tc.cursor, restart, err, tc.wantRestart, tc.wantErr)
			}
		})
	}
}

// TestApplyAdmittedFollowsTheCallersCursor checks that the index takes
// the caller's verdict: an id its own cursor would call a gap applies, a
// restart clears the worker, and the cursor becomes the event's id.
func TestApplyAdmittedFollowsTheCallersCursor(t *testing.T) {
	x := NewExact()
	w := routing.Worker{ID: 2}
	stored := func(id uint64, local routing.LocalHash) *routing.Event {
		return &routing.Event{Worker: w, ID: id, Kind: routing.EventStored,
			Blocks: []routing.StoredBlock{{Engine: routing.EngineHash(local), Local: local}}}
	}
	if err := x.ApplyAdmitted(stored(5, 10), false); err != nil {
		t.Fatal(err)
	}
	if c, _ := x.Cursor(w); c != 5 {
		t.Fatalf("cursor %d, want 5", c)
	}
	if err := x.ApplyAdmitted(stored(1, 20), true); err != nil {
		t.Fatal(err)
	}
	if got := x.FindMatches([]routing.SeqHash{10}, nil); len(got) != 0 {
		t.Fatalf("restart kept the old block: %v", got)
	}
	if got := x.FindMatches([]routing.SeqHash{20}, nil); len(got) != 1 {
		t.Fatalf("matches %v, want the new block", got)
	}
	if err := x.ApplyAdmitted(&routing.Event{Worker: w, ID: 2}, false); !errors.Is(err, routing.ErrBadEvent) {
		t.Fatalf("malformed event: %v", err)
	}
}
