package consumer

import (
	"math"
	"time"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// Objective values lanes for Best and BestOf. A lane whose prefix is d
// blocks deep gains Slope×d + Intercept(r), where r is the lane's Result
// without its depth; Intercept reports false for a lane that must not be
// chosen. Slope is shared by every lane and must not be negative: a gain
// that grows with depth at one rate for all lanes is what lets one probe,
// at the depth a lane would need, tell whether it can beat another.
type Objective struct {
	Slope     float64
	Intercept func(r Result) (float64, bool)
}

// gain is the objective at depth d for a lane with intercept icpt.
func (o Objective) gain(d int, icpt float64) float64 { return float64(d)*o.Slope + icpt }

// BestOf returns the result of rs with the greatest gain under o, the
// earliest of equals, if that gain exceeds bar. It defines what Best
// answers: Best(…) is BestOf(Query(…)) computed with fewer probes.
func BestOf(rs []Result, o Objective, bar float64) (Result, float64, bool) {
	var best Result
	var gain float64
	found := false
	for _, r := range rs {
		icpt, ok := o.Intercept(r)
		if !ok {
			continue
		}
		if g := o.gain(r.Depth, icpt); g > bar && (!found || g > gain) {
			best, gain, found = r, g, true
		}
	}
	return best, gain, found
}

// Best answers the question a DC decision asks of the lanes of domain:
// which one, if any, gains more than bar under o with its prefix of hs,
// and how deep that prefix is. The answer is BestOf over Query's results
// whenever the filters have no false positive at the positions either
// search probes; like Query, it assumes prefix-monotone membership.
//
// Query finds every lane's depth, about a dozen dependent probes per lane
// at mixed depths, so with filters out of cache its cost is the number of
// cache lines it reads. Best searches for the maximum instead, in rounds
// over the lanes still able to win (see bestSearch): a lane that cannot
// beat the best gain already established is settled by one probe, at the
// depth it would need, or by none, and only the winner's depth is found
// exactly and verified. A 16-lane search at mixed depths reads a fraction
// of Query's lines; docs/benchmarks.md has the figures.
func (c *Consumer) Best(domain producer.Domain, hs []routing.SeqHash, now time.Time, o Objective, bar float64) (Result, float64, bool) {
	es := c.lanes.Load().byDomain[domain]
	if len(es) == 0 {
		return Result{}, 0, false
	}
	var buf [16]contender
	s := bestSearch{hs: hs, o: o, bar: bar, window: c.cfg.VerifyWindow, cs: buf[:0]}
	mu := es[0].lane.mu
	mu.RLock()
	defer mu.RUnlock()
	for _, e := range es {
		l := e.lane
		if icpt, ok := o.Intercept(l.result(now)); ok {
			hi := 0
			if l.f != nil {
				hi = len(hs)
			}
			s.cs = append(s.cs, contender{l: l, f: l.f, icpt: icpt, hi: hi})
		}
	}
	w, ok := s.run()
	if !ok {
		return Result{}, 0, false
	}
	r := s.cs[w].l.result(now)
	r.Depth = s.cs[w].lo
	return r, o.gain(r.Depth, s.cs[w].icpt), true
}

// contender is one lane's state in a bestSearch: its depth is known to
// lie in [lo, hi] (lo blocks probed present, block hi probed absent or hi
// the request's length).
type contender struct {
	l      *Lane
	f      *filter.Cuckoo
	icpt   float64
	lo, hi int
	next   int // the depth this round probes, 0 for none
	dead   bool
}

// bestSearch finds the contender with the greatest gain. Each round
// first drops every lane that cannot win: one whose best possible gain
// (at hi) does not exceed bar, or does not exceed the largest gain some
// lane is known to reach (at its lo; on a tie the earlier lane wins).
// Then it probes every remaining lane once, at a position chosen by the
// state of the lead:
//
//   - no lane is known to beat bar, or the lead's depth is exact: each
//     other lane is probed at the least depth that would beat it. A miss
//     settles the lane, which is what makes lanes without the prefix, or
//     shallower than the leader, cost one probe;
//   - otherwise the lanes are probed at the depth where they would reach
//     the midpoint between the lead's known gain and the best possible
//     one, a binary search for the maximum over all lanes at once.
//
// A round in which every probed lane hits says nothing about which of
// them leads, which is the case when all lanes hold the whole prefix; the
// lane with the best known gain then has its depth found exactly, so the
// next round settles the others against it. When one lane is left, its
// depth is found, and the window below it re-tested as in prefixDepth; if
// that finds a false positive, the search falls back to every lane's full
// prefixDepth.
//
// A round's probes do not depend on each other, and their answers narrow
// the brackets arithmetically (filter.Cuckoo.Hit, which reads both
// buckets without a branch), so that no mispredicted branch holds back
// the next lane's read and the round's cache misses overlap. Cold, that
// made the search about a tenth faster than Contains with branches; the
// binary searches that find one lane's depth stay with Contains, whose
// next position depends on each answer anyway. Probing several positions
// of a lane per round (a k-ary search, with a budget of 32 probes a
// round) and reading every bucket of a round before testing any were
// both measured and were slower, hot and cold: with the filters out of
// cache the search's cost follows the cache lines it reads more than the
// round trips it waits for.
type bestSearch struct {
	hs     []routing.SeqHash
	o      Objective
	bar    float64
	window int
	cs     []contender
	// probes and fellBack are for the tests and benchmarks.
	probes   int
	fellBack bool
}

func (s *bestSearch) contains(c *contender, d int) bool {
	s.probes++
	return c.f.Contains(s.hs[d-1])
}

// run returns the winner's index with its depth in lo (== hi).
func (s *bestSearch) run() (int, bool) {
	for {
		lead, alive := s.prune()
		if alive == 0 {
			return 0, false
		}
		lc := &s.cs[lead]
		if alive == 1 {
			if lc.lo < lc.hi {
				// Found exactly, it may yet fall to the bar.
				s.resolve(lead)
				continue
			}
			if s.verified(lead) {
				return lead, true
			}
			return s.fallback()
		}
		leadGain := s.o.gain(lc.lo, lc.icpt)
		// Choose every position of the round, then test them.
		if leadGain <= s.bar || lc.lo == lc.hi {
			if leadGain <= s.bar {
				lead, leadGain = -1, s.bar
			}
			for j := range s.cs {
				c := &s.cs[j]
				c.next = 0
				if c.dead || j == lead {
					continue
				}
				if c.next = s.beating(c, leadGain, j < lead); c.next > c.hi {
					c.dead, c.next = true, 0
				}
			}
		} else {
			hiGain := math.Inf(-1)
			for j := range s.cs {
				if c := &s.cs[j]; !c.dead {
					hiGain = max(hiGain, s.o.gain(c.hi, c.icpt))
				}
			}
			target := leadGain + (hiGain-leadGain)/2
			for j := range s.cs {
				c := &s.cs[j]
				c.next = 0
				if !c.dead && c.lo < c.hi {
					c.next = s.reaching(c, target)
				}
			}
		}
		// The round's answers narrow brackets without a branch on them,
		// so that every read of the round is in flight at once.
		hits, probed := uint64(1), 0
		for j := range s.cs {
			c := &s.cs[j]
			d := c.next
			if d == 0 {
				continue
			}
			probed++
			h := c.f.Hit(s.hs[d-1])
			keep := h - 1 // all ones on a miss
			c.lo ^= (c.lo ^ d) &^ int(keep)
			c.hi ^= (c.hi ^ (d - 1)) & int(keep)
			hits &= h
		}
		s.probes += probed
		allHit := hits == 1
		if allHit && probed > 1 {
			lead, _ = s.prune()
			s.resolve(lead)
		}
	}
}

// prune marks the lanes that cannot win dead and returns the lead (the
// live lane with the best known gain, the earliest of equals) and the
// number of live lanes.
func (s *bestSearch) prune() (lead, alive int) {
	lead = -1
	var leadGain float64
	for j := range s.cs {
		c := &s.cs[j]
		if c.dead {
			continue
		}
		if s.o.gain(c.hi, c.icpt) <= s.bar {
			c.dead = true
			continue
		}
		if g := s.o.gain(c.lo, c.icpt); lead < 0 || g > leadGain {
			lead, leadGain = j, g
		}
	}
	for j := range s.cs {
		c := &s.cs[j]
		if c.dead {
			continue
		}
		if g := s.o.gain(c.hi, c.icpt); j != lead && (g < leadGain || (g == leadGain && lead < j)) {
			c.dead = true
			continue
		}
		alive++
	}
	return lead, alive
}

// beating returns the least depth in (c.lo, c.hi+1] at which c's gain
// exceeds g (reaches it, when orEqual); c.hi+1 means none does.
func (s *bestSearch) beating(c *contender, g float64, orEqual bool) int {
	d := c.hi + 1
	if s.o.Slope > 0 {
		if x := math.Floor((g-c.icpt)/s.o.Slope) + 1; x < float64(d) {
			d = max(int(x), c.lo+1)
		}
	}
	// The estimate can be off by one either way in floating point; the
	// gains decide.
	for d > c.lo+1 && s.wins(c, d-1, g, orEqual) {
		d--
	}
	for d <= c.hi && !s.wins(c, d, g, orEqual) {
		d++
	}
	return d
}

// wins reports whether c's gain at depth d exceeds g (or reaches it).
func (s *bestSearch) wins(c *contender, d int, g float64, orEqual bool) bool {
	v := s.o.gain(d, c.icpt)
	return v > g || (orEqual && v == g)
}

// reaching returns a depth in (c.lo, c.hi] near where c's gain reaches
// target.
func (s *bestSearch) reaching(c *contender, target float64) int {
	d := c.hi
	if s.o.Slope > 0 {
		if x := math.Ceil((target - c.icpt) / s.o.Slope); x < float64(d) {
			d = int(x)
		}
	}
	return min(max(d, c.lo+1), c.hi)
}

// probe tests c at depth d (its block d-1) and narrows its bracket.
func (s *bestSearch) probe(c *contender, d int) bool {
	if s.contains(c, d) {
		c.lo = d
		return true
	}
	c.hi = d - 1
	return false
}

// resolve binary searches c's bracket down to its depth.
func (s *bestSearch) resolve(j int) {
	c := &s.cs[j]
	for c.lo < c.hi {
		s.probe(c, int(uint(c.lo+c.hi+1)>>1))
	}
}

// verified re-tests the window below the winner's depth, as prefixDepth
// does; its block lo-1 is the search's last hit and is not probed again.
func (s *bestSearch) verified(j int) bool {
	c := &s.cs[j]
	for p := max(c.lo-s.window, 1); p < c.lo-1; p++ {
		if s.probes++; !c.f.Contains(s.hs[p]) {
			return false
		}
	}
	return true
}

// fallback answers from every lane's full prefixDepth, after
// verification found that a false positive misled the search.
func (s *bestSearch) fallback() (int, bool) {
	s.fellBack = true
	w, bar := -1, s.bar
	for j := range s.cs {
		c := &s.cs[j]
		c.lo = 0
		if c.f != nil {
			c.lo = prefixDepth(c.f, s.hs, s.window)
		}
		c.hi = c.lo
		if g := s.o.gain(c.lo, c.icpt); g > bar {
			w, bar = j, g
		}
	}
	return w, w >= 0
}
