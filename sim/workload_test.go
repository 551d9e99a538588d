package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/traces"
)

func TestWorkloadSharesPrefixesAtAnyBlockSize(t *testing.T) {
	a := traces.Request{InputTokens: 3 * 512, HashIDs: []uint64{1, 2, 3}}
	b := traces.Request{InputTokens: 3*512 - 100, HashIDs: []uint64{1, 2, 4}}
	for _, bs := range []int{16, 64, 128, 512} {
		w, err := NewWorkload(bs)
		if err != nil {
			t.Fatal(err)
		}
		pa, pb := w.Prompt(0, a), w.Prompt(1, b)
		if len(pa.Hashes) != 3*512/bs || len(pb.Hashes) != (3*512-100)/bs {
			t.Fatalf("bs %d: %d and %d blocks", bs, len(pa.Hashes), len(pb.Hashes))
		}
		shared := 2 * 512 / bs
		for i := range pb.Hashes {
			if same := pa.Hashes[i] == pb.Hashes[i]; same != (i < shared) {
				t.Fatalf("bs %d block %d: equal=%v, want %v", bs, i, same, i < shared)
			}
		}
	}
}

func TestNewWorkloadRejectsBlockSize(t *testing.T) {
	for _, bs := range []int{0, -64, 48, 1024} {
		if _, err := NewWorkload(bs); !errors.Is(err, ErrBlockSize) {
			t.Fatalf("block size %d: err = %v", bs, err)
		}
	}
}

func TestTokensOfIsAFunctionOfTheID(t *testing.T) {
	x, y, z := TokensOf(7, nil), TokensOf(7, nil), TokensOf(8, nil)
	if len(x) != 512 || x[0] != y[0] || x[511] != y[511] {
		t.Fatal("tokens of one id differ between calls")
	}
	if x[0] == z[0] && x[1] == z[1] && x[2] == z[2] {
		t.Fatal("different ids give the same tokens")
	}
}

func TestInfiniteCacheBound(t *testing.T) {
	w, _ := NewWorkload(512)
	reqs := []traces.Request{
		{InputTokens: 1024, HashIDs: []uint64{1, 2}},
		{InputTokens: 1536, HashIDs: []uint64{1, 2, 3}},
		{InputTokens: 1024, HashIDs: []uint64{4, 2}}, // same id, different parent: a miss
	}
	// 7 blocks; hits: the second request's first two blocks.
	if got, want := InfiniteCacheBound(w.Prompts(reqs)), 2.0/7; got != want {
		t.Fatalf("bound = %v, want %v", got, want)
	}
	if InfiniteCacheBound(nil) != 0 {
		t.Fatal("bound of nothing is not 0")
	}
}

func TestPercentileAndBalance(t *testing.T) {
	xs := []time.Duration{5, 1, 4, 2, 3}
	tests := []struct {
		name string
		q    float64
		want time.Duration
	}{{"min", 0, 1}, {"median", 0.5, 3}, {"p99", 0.99, 5}, {"max", 1, 5}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(xs, tc.q); got != tc.want {
				t.Fatalf("Percentile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	if Mean(xs) != 3 || Percentile(nil, 0.5) != 0 {
		t.Fatal("Mean or empty Percentile wrong")
	}
	if got := MaxOverMean([]float64{1, 1, 4}); got != 2 {
		t.Fatalf("MaxOverMean = %v, want 2", got)
	}
	if MaxOverMean([]float64{0, 0}) != 0 {
		t.Fatal("MaxOverMean of no work is not 0")
	}
}
