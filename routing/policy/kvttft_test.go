package policy

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
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
	def := DefaultKVTTFTConfig()
	bad := []KVTTFTConfig{{SessionCredit: -1, Headroom: 0.5}, {DecodeWeight: 1, Headroom: 1.5},
		{SessionCredit: 1, Headroom: 0.5, BalanceWeight: 1, BalanceLimit: 0.5, BalanceWindow: 10},
		{SessionCredit: 1, Headroom: 0.5, BalanceWeight: 1, BalanceLimit: 1, BalanceWindow: 1},
		{SessionCredit: 1, Headroom: 0.5, BalanceWeight: -1, BalanceLimit: 1, BalanceWindow: 10}}
	if off := (KVTTFTConfig{SessionCredit: def.SessionCredit, Headroom: def.Headroom}); off.Validate() != nil {
		t.Fatalf("balance off needs no limit or window: %v", off.Validate())
	}
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

// The balance term: a worker that did more than the mean of the recent
// prefill pays for the excess, block for block at weight 1.
func TestKVTTFTBalance(t *testing.T) {
	req := &Request{ISLTokens: 1600, BlockSize: 16} // 100 blocks
	cfg := DefaultKVTTFTConfig()
	cfg.BalanceWeight, cfg.BalanceLimit, cfg.BalanceWindow = 1, 1, 1e6
	tests := []struct {
		name  string
		limit float64
		// prior requests sent to engine 1 (the only candidate then).
		prior int
		cands []Candidate
		want  int
	}{
		// Engine 1 did 100 blocks, the mean is 50: its excess of 50
		// outweighs 30 cached blocks (saving 30 and crediting 15).
		{"excess over cache", 1, 1, []Candidate{c(1, 30, 1120, 0, 0), c(2, 0, 1600, 0, 0)}, 1},
		// It does not outweigh 40 cached blocks (saving 40, crediting 20).
		{"cache over excess", 1, 1, []Candidate{c(1, 40, 960, 0, 0), c(2, 0, 1600, 0, 0)}, 0},
		// Below BalanceLimit times the mean nothing counts: 100 blocks
		// against a limit of 2 * 50.
		{"within the limit", 2, 1, []Candidate{c(1, 1, 1584, 0, 0), c(2, 0, 1600, 0, 0)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cfg
			cfg.BalanceLimit = tc.limit
			s, err := NewKVTTFT(cfg, rng(1))
			if err != nil {
				t.Fatal(err)
			}
			var d Decision
			for range tc.prior {
				if err := s.Select(&d, req, []Candidate{c(1, 0, 1600, 0, 0)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Select(&d, req, tc.cands); err != nil {
				t.Fatal(err)
			}
			if d.Index != tc.want {
				t.Fatalf("chose %d (costs %v), want %d", d.Index, d.Costs, tc.want)
			}
		})
	}
}

// Identical requests on identical idle workers alternate under the
// balance term, where ties alone would pick at random.
func TestKVTTFTBalanceAlternates(t *testing.T) {
	s, err := NewKVTTFT(DefaultKVTTFTConfig(), rng(7))
	if err != nil {
		t.Fatal(err)
	}
	req := &Request{ISLTokens: 1600, BlockSize: 16}
	counts := map[routing.WorkerID]int{}
	var d Decision
	for i := range 100 {
		if err := s.Select(&d, req, []Candidate{c(1, 0, 1600, 0, 0), c(2, 0, 1600, 0, 0)}); err != nil {
			t.Fatal(err)
		}
		counts[d.Worker.ID]++
		if diff := counts[1] - counts[2]; diff < -1 || diff > 1 {
			t.Fatalf("after %d decisions: %v", i+1, counts)
		}
	}
}

// Recent work decays by 1 - 1/window per decision, across rescales, and
// a worker that no longer receives work is forgotten.
func TestRecentWorkDecays(t *testing.T) {
	a, b := c(1, 0, 0, 0, 0), c(2, 0, 0, 0, 0)
	r := newRecentWork(2) // halves per decision
	sa, sb := r.slots([]Candidate{a, b})[0], r.slots([]Candidate{a, b})[1]
	r.add(sa, 8)
	r.add(sb, 8)
	if !near(r.value(sa), 4) || !near(r.value(sb), 8) {
		t.Fatalf("after two decisions: %v, %v", r.value(sa), r.value(sb))
	}
	for range 2000 { // scale 2^2000 would overflow without rescaling
		r.add(r.slots([]Candidate{b})[0], 1)
	}
	if _, ok := r.slot[a.Info.Worker]; ok || len(r.sums) != 1 || !near(r.value(r.slots([]Candidate{b})[0]), 2) {
		t.Fatalf("after 2,000 more: slots %v, sums %v (want b alone, at 2)", r.slot, r.sums)
	}
}

// Slots follow the candidates when the list changes between decisions.
func TestRecentWorkSlots(t *testing.T) {
	r := newRecentWork(10)
	x, y, z := c(1, 0, 0, 0, 0), c(2, 0, 0, 0, 0), c(3, 0, 0, 0, 0)
	r.add(r.slots([]Candidate{x, y})[1], 5) // y
	for _, tc := range []struct {
		name  string
		cands []Candidate
		want  []float64
	}{
		{"same", []Candidate{x, y}, []float64{0, 5}},
		{"swapped", []Candidate{y, x}, []float64{5, 0}},
		{"replaced", []Candidate{y, z}, []float64{5, 0}},
		{"grown", []Candidate{z, x, y}, []float64{0, 0, 5}},
	} {
		slots := r.slots(tc.cands)
		for i, s := range slots {
			if !near(r.value(s), tc.want[i]) {
				t.Fatalf("%s: candidate %d has %v, want %v", tc.name, i, r.value(s), tc.want[i])
			}
		}
	}
}
