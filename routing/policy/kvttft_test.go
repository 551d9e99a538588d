package policy

import (
	"errors"
	"slices"
	"testing"
)

func TestKVTTFTChooses(t *testing.T) {
	req := &Request{ISLTokens: 1600, BlockSize: 16} // 100 blocks
	withTotal := func(x Candidate, total int) Candidate { x.Info.TotalBlocks = total; return x }
	tests := []struct {
		name  string
		cands []Candidate
		want  int
	}{
		// 60 cached blocks on engine 1 outweigh 600 held blocks there:
		// the kv model (prefill 40 + 600 against 100 + 0) would not.
		{"cache over held blocks", []Candidate{c(1, 60, 640, 600, 3), c(2, 0, 1600, 0, 0)}, 0},
		// A prefill backlog of 200 blocks costs more than 60 cached ones.
		{"queue over cache", []Candidate{c(1, 60, 640+3200, 0, 3), c(2, 0, 1600, 0, 0)}, 1},
		// Past the headroom every held block counts in full.
		{"capacity", []Candidate{withTotal(c(1, 60, 640, 1000, 3), 1000), withTotal(c(2, 0, 1600, 0, 0), 1000)}, 1},
		// An unknown capacity has no hinge.
		{"unknown capacity", []Candidate{c(1, 60, 640, 500, 3), withTotal(c(2, 0, 1600, 0, 0), 1000)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewKVTTFT(DefaultKVTTFTConfig(), rng(1))
			if err != nil {
				t.Fatal(err)
			}
			var d Decision
			if err := s.Select(&d, req, tc.cands); err != nil {
				t.Fatal(err)
			}
			if d.Index != tc.want || len(d.Costs) != len(tc.cands) || d.Cost != d.Costs[d.Index] {
				t.Fatalf("chose %d (costs %v), want %d", d.Index, d.Costs, tc.want)
			}
		})
	}
}

// The terms are those of the file's documentation.
func TestKVTTFTCost(t *testing.T) {
	cfg := KVTTFTConfig{SessionCredit: 2, DecodeWeight: 0.5, Headroom: 0.5}
	x := c(1, 10, 320, 700, 0)
	x.Info.TotalBlocks = 1000
	// prefill 320/16 = 20, future (2-1)*10, decode 0.5*700, capacity 700-500.
	if got, want := cfg.cost(&Request{ISLTokens: 480, BlockSize: 16}, &x), 20.0-10+350+200; !near(got, want) {
		t.Fatalf("cost = %v, want %v", got, want)
	}
}

func TestKVTTFTConfig(t *testing.T) {
	if _, err := NewKVTTFT(KVTTFTConfig{}, rng(1)); err != nil {
		t.Fatalf("zero config (the defaults): %v", err)
	}
	bad := []KVTTFTConfig{{SessionCredit: -1, Headroom: 0.5}, {DecodeWeight: 1, Headroom: 1.5}}
	for _, cfg := range bad {
		if _, err := NewKVTTFT(cfg, rng(1)); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v: err = %v", cfg, err)
		}
	}
	if _, err := NewKVTTFT(DefaultKVTTFTConfig(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil generator: err = %v", err)
	}
	s, err := New(NameKVTTFT, DefaultOptions(rng(1)))
	if err != nil || s.Name() != NameKVTTFT || !slices.Contains(Names(), NameKVTTFT) {
		t.Fatalf("registry: %v, %v", s, err)
	}
	var d Decision
	if err := s.Select(&d, &Request{BlockSize: 16}, nil); !errors.Is(err, ErrNoCompatibleWorker) {
		t.Fatalf("no candidates: err = %v", err)
	}
}
