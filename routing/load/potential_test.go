package load

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

func TestPotential(t *testing.T) {
	a := chain(1, 2, 3, 4)
	q := chain(1, 2, 3, 7, 8, 9) // shares 3 blocks with a
	matches := []routing.Match{
		{Worker: w1, Overlap: routing.Overlap{Device: 3}},
		{Worker: w2, Overlap: routing.Overlap{Device: 1, Host: 2}},
	}
	tests := []struct {
		name string
		cfg  Config
		isl  int
		want []routing.Load
	}{
		{
			name: "kv reuse",
			cfg:  DefaultConfig(16),
			isl:  100, // 7 blocks, 6 hashed
			want: []routing.Load{
				{PrefillTokens: 64 + 52, DecodeBlocks: 4 + 7 - 3, ActiveRequests: 1},
				{PrefillTokens: 84, DecodeBlocks: 7},
			},
		},
		{
			name: "no kv reuse",
			cfg:  noKVReuse(16),
			isl:  96,
			want: []routing.Load{
				{PrefillTokens: 64 + 48, DecodeBlocks: 4 + 6, ActiveRequests: 1},
				{PrefillTokens: 80, DecodeBlocks: 6},
			},
		},
		{
			name: "active blocks not tracked (prefill stage)",
			cfg:  Config{BlockSize: 16, TrackPrefillTokens: true, AssumeKVReuse: true},
			isl:  96,
			want: []routing.Load{
				{PrefillTokens: 64 + 48, ActiveRequests: 1},
				{PrefillTokens: 80},
			},
		},
		{
			name: "prefill not tracked",
			cfg:  Config{BlockSize: 16, TrackActiveBlocks: true, AssumeKVReuse: true},
			isl:  96,
			want: []routing.Load{
				{PrefillTokens: 48, DecodeBlocks: 4 + 3, ActiveRequests: 1},
				{PrefillTokens: 80, DecodeBlocks: 6},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, tc.cfg)
			mustAdd(t, tr, Request{ID: "a", Worker: w1, Hashes: a, ISLTokens: 64}, t0)
			got, err := tr.Potential(nil, Query{Hashes: q, ISLTokens: tc.isl}, matches)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Errorf("worker %v: %+v, want %+v", matches[i].Worker, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestPotentialRefusesBadInput(t *testing.T) {
	tr := newTracker(t, DefaultConfig(16))
	tests := []struct {
		name    string
		q       Query
		matches []routing.Match
	}{
		{name: "negative isl", q: Query{ISLTokens: -1}},
		{name: "hashes beyond isl", q: Query{Hashes: chain(1, 2), ISLTokens: 31}},
		{name: "negative overlap", q: Query{ISLTokens: 16}, matches: []routing.Match{{Worker: w1, Overlap: routing.Overlap{Device: -1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tr.Potential(nil, tc.q, tc.matches); !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			}
		})
	}
}

func TestPotentialDoesNotAllocate(t *testing.T) {
	tr := newTracker(t, DefaultConfig(16))
	q := chain(1, 2, 3, 4, 5, 6, 7, 8)
	matches := make([]routing.Match, 32)
	for i := range matches {
		matches[i].Worker = routing.Worker{ID: routing.WorkerID(i)}
		mustAdd(t, tr, Request{ID: string(rune('a' + i)), Worker: matches[i].Worker, Hashes: q[:i%8], ISLTokens: 128}, t0)
	}
	dst := make([]routing.Load, 0, len(matches))
	allocs := testing.AllocsPerRun(100, func() {
		dst, _ = tr.Potential(dst[:0], Query{Hashes: q, ISLTokens: 128}, matches)
	})
	if allocs != 0 {
		t.Fatalf("Potential allocated %v times per call", allocs)
	}
}
