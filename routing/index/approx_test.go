package index

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"pgregory.net/rapid"
)

var t0 = time.Unix(1_000_000, 0)

func TestApproxConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   ApproxConfig
		field string
	}{
		{name: "zero takes defaults", cfg: ApproxConfig{}.EnsureDefaults()},
		{name: "side defaults", cfg: ApproxConfig{TTL: DefaultSideTTL}.EnsureDefaults()},
		{name: "bad policy", cfg: ApproxConfig{Policy: 9, TTL: 1, MaxBlocks: 1, PruneTarget: 1}, field: "ApproxConfig.Policy"},
		{name: "negative ttl", cfg: ApproxConfig{TTL: -1, MaxBlocks: 1, PruneTarget: 1}, field: "ApproxConfig.TTL"},
		{name: "zero max blocks", cfg: ApproxConfig{TTL: 1, PruneTarget: 1}, field: "ApproxConfig.MaxBlocks"},
		{name: "prune target above 1", cfg: ApproxConfig{TTL: 1, MaxBlocks: 1, PruneTarget: 1.5}, field: "ApproxConfig.PruneTarget"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err %v, want ErrConfig naming %s", err, tc.field)
			}
		})
	}
	if _, err := NewApprox(ApproxConfig{TTL: -time.Second}); !errors.Is(err, ErrConfig) {
		t.Errorf("NewApprox accepted a bad config: %v", err)
	}
	if _, err := NewSide(ApproxConfig{Policy: PolicyLRU}); !errors.Is(err, ErrConfig) {
		t.Errorf("NewSide accepted LRU: %v", err)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []Policy{PolicyTTL, PolicyLRU} {
		if got, err := ParsePolicy(p.String()); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p, got, err)
		}
	}
	if _, err := ParsePolicy("fifo"); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"fifo"`) {
		t.Errorf("ParsePolicy(fifo) = %v, want ErrConfig naming the value", err)
	}
}

func mustApprox(t *testing.T, cfg ApproxConfig) *Approx {
	t.Helper()
	a, err := NewApprox(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func record(t *testing.T, a *Approx, w routing.Worker, hs []routing.SeqHash, now time.Time) Lease {
	t.Helper()
	l, err := a.Record(w, hs, now)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestApproxTTL(t *testing.T) {
	a := mustApprox(t, ApproxConfig{})
	req := seqs(1, 2, 3, 4)
	record(t, a, w1, req, t0)
	record(t, a, w2, req[:2], t0.Add(time.Minute))
	cases := []struct {
		name string
		at   time.Time
		q    []routing.SeqHash
		want []routing.Match
	}{
		{name: "both hold a prefix", at: t0.Add(time.Second), q: seqs(1, 2, 3, 9), want: []routing.Match{match(w1, 3, 0, 0), match(w2, 2, 0, 0)}},
		{name: "first block miss", at: t0, q: seqs(7, 2), want: nil},
		{name: "just before expiry", at: t0.Add(DefaultTTL - 1), q: req, want: []routing.Match{match(w1, 4, 0, 0), match(w2, 2, 0, 0)}},
		{name: "expired at exactly TTL", at: t0.Add(DefaultTTL), q: req, want: []routing.Match{match(w2, 2, 0, 0)}},
		{name: "all expired", at: t0.Add(DefaultTTL + time.Minute), q: req, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := a.FindMatches(tc.q, tc.at, nil); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	record(t, a, w1, req[:1], t0.Add(DefaultTTL-time.Second))
	if got := a.FindMatches(req, t0.Add(DefaultTTL+time.Second), nil); !slices.Equal(got, []routing.Match{match(w1, 1, 0, 0), match(w2, 2, 0, 0)}) {
		t.Errorf("refresh: got %v", got)
	}
	a.Prune(t0.Add(10 * DefaultTTL))
	if s := a.Stats(); s.Pairs != 0 || s.Blocks != 0 || s.Expired != 6 {
		t.Errorf("after prune %+v", s)
	}
}

func TestApproxPruneSoonestExpiringDeepestFirst(t *testing.T) {
	a := mustApprox(t, ApproxConfig{MaxBlocks: 10, PruneTarget: 0.8})
	record(t, a, w1, seqs(1, 2, 3, 4, 5, 6), t0)
	record(t, a, w2, seqs(7, 8, 9, 10, 11, 12), t0.Add(time.Second))
	if got := a.FindMatches(seqs(1, 2, 3, 4, 5, 6), t0.Add(2*time.Second), nil); !slices.Equal(got, []routing.Match{match(w1, 2, 0, 0)}) {
		t.Errorf("w1 after prune: %v, want its two shallowest blocks", got)
	}
	if got := a.FindMatches(seqs(7, 8, 9, 10, 11, 12), t0.Add(2*time.Second), nil); !slices.Equal(got, []routing.Match{match(w2, 6, 0, 0)}) {
		t.Errorf("w2 after prune: %v", got)
	}
	if s := a.Stats(); s.Pairs != 8 || s.Pruned != 4 {
		t.Errorf("stats %+v, want 8 pairs, 4 pruned", s)
	}
}

func TestApproxLRU(t *testing.T) {
	cfg := ApproxConfig{Policy: PolicyLRU}
	t.Run("errors", func(t *testing.T) {
		a := mustApprox(t, cfg)
		if _, err := a.Record(w1, seqs(1), t0); !errors.Is(err, ErrUnknownWorker) {
			t.Errorf("record on undeclared worker: %v", err)
		}
		if err := a.SetWorker(routing.WorkerInfo{Worker: w1}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "TotalBlocks") {
			t.Errorf("zero capacity: %v", err)
		}
		if err := a.Release(42); !errors.Is(err, ErrUnknownLease) {
			t.Errorf("unknown lease: %v", err)
		}
	})
	t.Run("referenced blocks are never evicted", func(t *testing.T) {
		a := mustApprox(t, cfg)
		if err := a.SetWorker(routing.WorkerInfo{Worker: w1, TotalBlocks: 4}); err != nil {
			t.Fatal(err)
		}
		l1 := record(t, a, w1, seqs(1, 2, 3, 4), t0)
		record(t, a, w1, seqs(5, 6, 7, 8), t0)
		if s := a.Stats(); s.Pairs != 8 || s.Evicted != 0 {
			t.Fatalf("over capacity with referenced blocks: %+v", s)
		}
		if err := a.Release(l1); err != nil {
			t.Fatal(err)
		}
		if got := a.FindMatches(seqs(1), t0, nil); len(got) != 0 {
			t.Errorf("released request still held: %v", got)
		}
		if got := a.FindMatches(seqs(5, 6, 7, 8), t0, nil); !slices.Equal(got, []routing.Match{match(w1, 4, 0, 0)}) {
			t.Errorf("referenced request: %v", got)
		}
	})
	t.Run("least recently released first, deeper first", func(t *testing.T) {
		a := mustApprox(t, cfg)
		if err := a.SetWorker(routing.WorkerInfo{Worker: w1, TotalBlocks: 7}); err != nil {
			t.Fatal(err)
		}
		la := record(t, a, w1, seqs(1, 2, 3), t0)
		lb := record(t, a, w1, seqs(4, 5, 6), t0)
		for _, l := range []Lease{la, lb} {
			if err := a.Release(l); err != nil {
				t.Fatal(err)
			}
		}
		record(t, a, w1, seqs(7, 8, 9), t0)
		want := map[string][]routing.Match{
			"a": {match(w1, 1, 0, 0)},
			"b": {match(w1, 3, 0, 0)},
			"c": {match(w1, 3, 0, 0)},
		}
		got := map[string][]routing.Match{
			"a": a.FindMatches(seqs(1, 2, 3), t0, nil),
			"b": a.FindMatches(seqs(4, 5, 6), t0, nil),
			"c": a.FindMatches(seqs(7, 8, 9), t0, nil),
		}
		for k := range want {
			if !slices.Equal(got[k], want[k]) {
				t.Errorf("request %s: got %v, want %v", k, got[k], want[k])
			}
		}
	})
	t.Run("shared prefix stays while another request references it", func(t *testing.T) {
		a := mustApprox(t, cfg)
		if err := a.SetWorker(routing.WorkerInfo{Worker: w1, TotalBlocks: 1}); err != nil {
			t.Fatal(err)
		}
		l1 := record(t, a, w1, seqs(1, 2), t0)
		record(t, a, w1, seqs(1, 3), t0)
		if err := a.Release(l1); err != nil {
			t.Fatal(err)
		}
		if got := a.FindMatches(seqs(1, 3), t0, nil); !slices.Equal(got, []routing.Match{match(w1, 2, 0, 0)}) {
			t.Errorf("got %v", got)
		}
		if got := a.FindMatches(seqs(1, 2), t0, nil); !slices.Equal(got, []routing.Match{match(w1, 1, 0, 0)}) {
			t.Errorf("released tail kept: %v", got)
		}
	})
	t.Run("removed worker's leases are no-ops", func(t *testing.T) {
		a := mustApprox(t, cfg)
		if err := a.SetWorker(routing.WorkerInfo{Worker: w1, TotalBlocks: 2}); err != nil {
			t.Fatal(err)
		}
		l := record(t, a, w1, seqs(1, 2), t0)
		if !a.RemoveWorker(w1) {
			t.Fatal("worker unknown")
		}
		if err := a.SetWorker(routing.WorkerInfo{Worker: w2, TotalBlocks: 2}); err != nil {
			t.Fatal(err)
		}
		record(t, a, w2, seqs(1, 2), t0)
		if err := a.Release(l); err != nil {
			t.Fatal(err)
		}
		if s := a.Stats(); s.Pairs != 2 || s.Workers != 1 || s.Leases != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestApproxLRUProperty records and releases random requests over two
// workers and checks after every step that each active lease's blocks are
// all held (never evicted while referenced) and that a worker exceeds its
// capacity only by referenced blocks.
func TestApproxLRUProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a, _ := NewApprox(ApproxConfig{Policy: PolicyLRU})
		caps := map[routing.Worker]int{}
		for _, w := range []routing.Worker{w1, w2} {
			caps[w] = rapid.IntRange(1, 6).Draw(rt, "cap")
			if err := a.SetWorker(routing.WorkerInfo{Worker: w, TotalBlocks: caps[w]}); err != nil {
				rt.Fatal(err)
			}
		}
		type active struct {
			w  routing.Worker
			hs []routing.SeqHash
			l  Lease
		}
		var live []active
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			if len(live) > 0 && rapid.Bool().Draw(rt, "release") {
				i := rapid.IntRange(0, len(live)-1).Draw(rt, "which")
				if err := a.Release(live[i].l); err != nil {
					rt.Fatal(err)
				}
				live = slices.Delete(live, i, i+1)
			} else {
				w := rapid.SampledFrom([]routing.Worker{w1, w2}).Draw(rt, "worker")
				locals := rapid.SliceOfN(rapid.Uint64Range(0, 2), 1, 4).Draw(rt, "locals")
				hs := seqs(locals...)
				l, err := a.Record(w, hs, t0)
				if err != nil {
					rt.Fatal(err)
				}
				live = append(live, active{w: w, hs: hs, l: l})
			}
			refd := map[routing.Worker]map[routing.SeqHash]bool{w1: {}, w2: {}}
			for _, ac := range live {
				for _, h := range ac.hs {
					refd[ac.w][h] = true
				}
				got := a.FindMatches(ac.hs, t0, nil)
				i := slices.IndexFunc(got, func(m routing.Match) bool { return m.Worker == ac.w })
				if i < 0 || int(got[i].Device) != len(ac.hs) {
					rt.Fatalf("active request on %v lost blocks: %v", ac.w, got)
				}
			}
			for w, c := range caps {
				held := a.workers[a.slots[w]].held
				if held > max(c, len(refd[w])) {
					rt.Fatalf("worker %v holds %d, capacity %d, referenced %d", w, held, c, len(refd[w]))
				}
			}
		}
	})
}
