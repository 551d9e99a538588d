package index

import (
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

func TestMergeDevice(t *testing.T) {
	cases := []struct {
		name          string
		primary, side []routing.Match
		want          []routing.Match
	}{
		{name: "empty"},
		{name: "primary only", primary: []routing.Match{match(w1, 2, 1, 1)}, want: []routing.Match{match(w1, 2, 1, 1)}},
		{name: "side only", side: []routing.Match{match(w2, 3, 0, 0)}, want: []routing.Match{match(w2, 3, 0, 0)}},
		{name: "primary deeper", primary: []routing.Match{match(w1, 5, 0, 0)}, side: []routing.Match{match(w1, 3, 0, 0)}, want: []routing.Match{match(w1, 5, 0, 0)}},
		{name: "side deeper", primary: []routing.Match{match(w1, 2, 0, 0)}, side: []routing.Match{match(w1, 4, 0, 0)}, want: []routing.Match{match(w1, 4, 0, 0)}},
		{name: "side covers part of the host run", primary: []routing.Match{match(w1, 2, 3, 2)}, side: []routing.Match{match(w1, 4, 0, 0)}, want: []routing.Match{match(w1, 4, 1, 2)}},
		{name: "side covers host and part of disk", primary: []routing.Match{match(w1, 1, 1, 3)}, side: []routing.Match{match(w1, 4, 0, 0)}, want: []routing.Match{match(w1, 4, 0, 1)}},
		{name: "side beyond everything", primary: []routing.Match{match(w1, 1, 1, 1)}, side: []routing.Match{match(w1, 9, 0, 0)}, want: []routing.Match{match(w1, 9, 0, 0)}},
		{
			name:    "interleaved workers stay sorted",
			primary: []routing.Match{match(w1, 1, 0, 0), match(w3, 2, 0, 0)},
			side:    []routing.Match{match(w2, 1, 0, 0), match(w3, 5, 0, 0)},
			want:    []routing.Match{match(w1, 1, 0, 0), match(w2, 1, 0, 0), match(w3, 5, 0, 0)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := MergeDevice(nil, tc.primary, tc.side)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for _, m := range got {
				if m.Device < 0 || m.Host < 0 || m.Disk < 0 {
					t.Errorf("negative depth %v", m)
				}
			}
		})
	}
}

// TestSidePredictsUntilEventsArrive routes a request, sees the prediction
// through the side index before the exact index has events, and sees it
// fade after the side TTL while the exact index carries the truth.
func TestSidePredictsUntilEventsArrive(t *testing.T) {
	x := NewExact()
	side, err := NewSide(ApproxConfig{})
	if err != nil {
		t.Fatal(err)
	}
	req := seqs(1, 2, 3)
	if _, err := side.Record(w2, req, t0); err != nil {
		t.Fatal(err)
	}
	score := func(at time.Time) []routing.Match {
		return MergeDevice(nil, x.FindMatches(req, nil), side.FindMatches(req, at, nil))
	}
	if got := score(t0.Add(time.Second)); !slices.Equal(got, []routing.Match{match(w2, 3, 0, 0)}) {
		t.Errorf("prediction: %v", got)
	}
	ev := stored(w2, 1, dev, blk(10, 1), blk(11, 2))
	if err := x.Apply(&ev); err != nil {
		t.Fatal(err)
	}
	if got := score(t0.Add(DefaultSideTTL)); !slices.Equal(got, []routing.Match{match(w2, 2, 0, 0)}) {
		t.Errorf("after side TTL: %v", got)
	}
}
