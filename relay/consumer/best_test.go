package consumer

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/routing"
)

// flat is the objective of lanes that differ only by depth.
var flat = Objective{Slope: 1, Intercept: func(LaneView) (float64, bool) { return 0, true }}

// lanesAt returns lanes dc-00, dc-01, ... holding the first depths[i]
// blocks of hs.
func lanesAt(t testing.TB, hs []routing.SeqHash, depths ...int) []*Lane {
	return lanesOf(t, 512, hs, depths...)
}

// lanesOf returns lanes dc-00, dc-01, ... with filters of capacity
// holding the first depths[i] blocks of hs.
func lanesOf(t testing.TB, capacity int, hs []routing.SeqHash, depths ...int) []*Lane {
	var ls []*Lane
	for i, d := range depths {
		ls = append(ls, &Lane{pool: poolIn(fmt.Sprintf("dc-%02d", i)), f: filterWith(t, capacity, hs[:d])})
	}
	return ls
}

// search runs Best's search over c's lanes and returns it with its
// answer, for its probe count and fallback flag.
func search(c *Consumer, hs []routing.SeqHash, o Objective, minGain float64) (*bestSearch, Result, bool) {
	s := new(bestSearch)
	r, _, ok := c.best(s, domain, hs, time.Unix(0, 0), o, minGain)
	return s, r, ok
}

// TestPropertyBestIsBestOfQuery: over any lanes (some not ready, some
// excluded by the objective, of two cuckoo geometries or Bloom, depths, intercepts
// and minimum gains drawn so that ties are common), Best answers the lane and depth BestOf gives over Query's
// results, and over the true depths.
func TestPropertyBestIsBestOfQuery(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 3))
		n := rapid.IntRange(0, 70).Draw(rt, "n")
		hs := chain(rng, n)
		truth := map[string]int{}
		intercepts := map[string]float64{}
		excluded := map[string]bool{}
		var lanes []*Lane
		for i := range rapid.IntRange(1, 20).Draw(rt, "lanes") {
			dc := fmt.Sprintf("dc-%02d", i)
			l := &Lane{pool: poolIn(dc)}
			if rapid.IntRange(0, 5).Draw(rt, "ready") > 0 {
				k := rapid.IntRange(0, n).Draw(rt, "depth")
				switch capacity := rapid.SampledFrom([]int{512, 2048, 0}).Draw(rt, "capacity"); capacity {
				case 0:
					l.f = bloomWith(t, 512, hs[:k])
				default:
					l.f = filterWith(t, capacity, hs[:k])
				}
				truth[dc] = k
			}
			intercepts[dc] = float64(rapid.IntRange(-8, 0).Draw(rt, "intercept")) * 4
			excluded[dc] = rapid.IntRange(0, 6).Draw(rt, "excluded") == 0
			lanes = append(lanes, l)
		}
		o := Objective{Slope: rapid.SampledFrom([]float64{0, 0.5, 1, 3.2}).Draw(rt, "slope"),
			Intercept: func(v LaneView) (float64, bool) { return intercepts[v.Pool.DC], !excluded[v.Pool.DC] }}
		minGain := float64(rapid.IntRange(-40, 40).Draw(rt, "minGain"))
		c := consumerWith(lanes...)
		now := time.Unix(0, 0)

		got, gotGain, gotOK := c.Best(domain, hs, now, o, minGain)
		want, wantGain, wantOK := BestOf(c.Query(nil, domain, hs, now), o, minGain)
		if gotOK != wantOK || got.Pool != want.Pool || got.Depth != want.Depth || gotGain != wantGain {
			rt.Fatalf("Best = %v %+v (gain %v), BestOf(Query) = %v %+v (gain %v)", gotOK, got, gotGain, wantOK, want, wantGain)
		}
		// A false positive can lengthen a depth, nothing can shorten one.
		if gotOK && got.Depth < truth[got.Pool.DC] {
			rt.Fatalf("winner %s at depth %d, holds %d", got.Pool.DC, got.Depth, truth[got.Pool.DC])
		}
	})
}

// TestBestProbes: a lane that cannot beat the leader costs one probe, and
// only the winner's depth is searched for.
func TestBestProbes(t *testing.T) {
	hs := chain(rand.New(rand.NewPCG(5, 5)), 64)
	full, forty := make([]int, 16), make([]int, 15)
	for i := range full {
		full[i] = 64
	}
	for i := range forty {
		forty[i] = 40
	}
	tests := []struct {
		name      string
		depths    []int
		minGain   float64
		wantDC    string
		wantDepth int
		maxProbes int
	}{
		// Position 1 on each lane, all misses.
		{name: "no lane holds the prefix", depths: make([]int, 16), maxProbes: 16},
		// Beating 40 needs 41 blocks: one probe at block 41 each.
		{name: "none beats the minimum gain", depths: forty, minGain: 40, maxProbes: 15},
		// 16 first probes, all hits; dc-00's depth in two reads of
		// resolveWays positions over (1, 64], plus its window; the others
		// cannot exceed 64.
		{name: "all lanes full, the first wins", depths: full, wantDC: "dc-00", wantDepth: 64, maxProbes: 16 + 2*resolveWays + 1},
		{name: "one deep lane", depths: []int{0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0, 0, 0}, wantDC: "dc-07", wantDepth: 50, maxProbes: 16 + 2*resolveWays + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := consumerWith(lanesAt(t, hs, tt.depths...)...)
			s, r, ok := search(c, hs, flat, tt.minGain)
			if ok != (tt.wantDC != "") || (ok && (r.Pool.DC != tt.wantDC || r.Depth != tt.wantDepth)) {
				t.Fatalf("got %v %s at %d, want %q at %d", ok, r.Pool.DC, r.Depth, tt.wantDC, tt.wantDepth)
			}
			if s.probes > tt.maxProbes {
				t.Fatalf("%d probes, want at most %d", s.probes, tt.maxProbes)
			}
		})
	}
}

// mixedLanes is a consumer of 16 lanes holding prefixes of hs at the
// benchmark's mixed depths for request r (mixedDepths).
func mixedLanes(t *testing.T, hs []routing.SeqHash, r int) *Consumer {
	depths := make([]int, benchLanes)
	for i := range depths {
		depths[i] = mixedDepths(r, i)
	}
	return consumerWith(lanesAt(t, hs, depths...)...)
}

// bestIsBestOfQuery runs Best's search over c's lanes under o and fails
// t unless it answers what BestOf does over Query's results; it returns
// the search and its answer.
func bestIsBestOfQuery(t *testing.T, c *Consumer, hs []routing.SeqHash, o Objective) (*bestSearch, Result) {
	t.Helper()
	s, got, ok := search(c, hs, o, 0)
	want, _, _ := BestOf(c.Query(nil, domain, hs, time.Unix(0, 0)), o, 0)
	if !ok || got.Pool != want.Pool || got.Depth != want.Depth {
		t.Fatalf("%+v, want %+v", got, want)
	}
	return s, got
}

// TestBestMixedDepthsProbesFewerThanQuery: at the benchmark's mixed
// depths, the search for the best lane probes less than half the
// positions that finding every lane's depth does.
func TestBestMixedDepthsProbesFewerThanQuery(t *testing.T) {
	hs := chain(rand.New(rand.NewPCG(6, 6)), 64)
	for r := range 13 {
		c := mixedLanes(t, hs, r)
		s, _ := bestIsBestOfQuery(t, c, hs, flat)
		full := 0
		for _, e := range c.lanes.Load().byDomain[domain] {
			_, n := prefixSearch(e.lane.f, hs, DefaultVerifyWindow)
			full += n
		}
		if 2*s.probes >= full {
			t.Fatalf("request %d: %d probes, the full query %d", r, s.probes, full)
		}
	}
}

// TestBestAtDifferentDistances: with lanes whose DCs are a round trip
// further off each (the benchmark's at-distances objective) at the
// benchmark's mixed depths, the answer is BestOf's over Query.
func TestBestAtDifferentDistances(t *testing.T) {
	o := Objective{Slope: 3.2, Intercept: func(v LaneView) (float64, bool) {
		var i int
		_, _ = fmt.Sscanf(v.Pool.DC, "dc-%d", &i)
		return -10 * float64(i), true
	}}
	hs := chain(rand.New(rand.NewPCG(6, 6)), 64)
	for r := range 13 {
		s, got := bestIsBestOfQuery(t, mixedLanes(t, hs, r), hs, o)
		t.Logf("request %d: %s at %d in %d rounds of %d lookups", r, got.Pool.DC, got.Depth, s.rounds, s.probes)
	}
}

// TestBestFallsBackWhenTheWindowMisses: membership with a hole followed by
// one present block (what a false positive looks like to a search that
// converges over it), at every position of the request: whenever the
// verification window catches the hole the answer is the full search's,
// some position is caught that way, and no answer is shorter than the
// true prefix.
func TestBestFallsBackWhenTheWindowMisses(t *testing.T) {
	hs := chain(rand.New(rand.NewPCG(7, 7)), 64)
	caught := 0
	for hole := 1; hole < 63; hole++ {
		// Blocks before the hole, and the one after it.
		held := append(append([]routing.SeqHash{}, hs[:hole]...), hs[hole+1])
		holed := &Lane{pool: poolIn("dc-00"), f: filterWith(t, 512, held)}
		c := consumerWith(holed, lanesAt(t, hs, 0, 20)[1])
		want, _, _ := BestOf(c.Query(nil, domain, hs, time.Unix(0, 0)), flat, 0)
		s, got, ok := search(c, hs, flat, 0)
		if !ok || got.Depth < hole {
			t.Fatalf("hole %d: %v %+v", hole, ok, got)
		}
		if s.fellBack {
			caught++
			if got.Pool != want.Pool || got.Depth != want.Depth {
				t.Fatalf("hole %d: fell back to %+v, the full search gives %+v", hole, got, want)
			}
		}
	}
	if caught == 0 {
		t.Fatal("the window caught no hole")
	}
}
