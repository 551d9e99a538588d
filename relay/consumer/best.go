package consumer

import (
	"math"
	"time"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// Objective values lanes for Best and BestOf. A lane whose prefix is d
// blocks deep gains Slope×d + Intercept(v), where v is the lane's view;
// Intercept reports false for a lane that must not be chosen. Slope is
// shared by every lane and must not be negative: a gain that grows with
// depth at one rate for all lanes is what lets one probe, at the depth a
// lane would need, tell whether it can beat another.
type Objective struct {
	Slope     float64
	Intercept func(v LaneView) (float64, bool)
}

// LaneView is what an Objective sees of a lane: the parts of its Result
// that do not depend on the request. Best values every lane of a domain
// for every request, so the view is four words, which the compiler passes
// and keeps in registers (a struct of at most four fields and 32 bytes);
// a view that carried the DC's name or the Load by value, like a whole
// Result, was assembled in memory for each call, at a third of the cost
// of a search that no lane answers. Pool and Load point into the lane's
// state or the Result: they are valid for the call only and must not be
// written.
type LaneView struct {
	Pool      *producer.PoolID
	Ready     bool
	Staleness time.Duration
	Load      *producer.Load
}

// View returns r's LaneView, which points into r.
func (r *Result) View() LaneView {
	return LaneView{Pool: &r.Pool, Ready: r.Ready, Staleness: r.Staleness, Load: &r.Load}
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
	for i := range rs {
		r := &rs[i]
		icpt, ok := o.Intercept(r.View())
		if !ok {
			continue
		}
		if g := o.gain(r.Depth, icpt); g > bar && (!found || g > gain) {
			best, gain, found = *r, g, true
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
	var s bestSearch
	return c.best(&s, domain, hs, now, o, bar)
}

// best is Best with the search's state in s (on Best's stack).
func (c *Consumer) best(s *bestSearch, domain producer.Domain, hs []routing.SeqHash, now time.Time, o Objective, bar float64) (Result, float64, bool) {
	es := c.lanes.Load().byDomain[domain]
	if len(es) == 0 {
		return Result{}, 0, false
	}
	if len(es) > maxBestLanes {
		return BestOf(c.Query(nil, domain, hs, now), o, bar)
	}
	// The fields are set one by one: assigning a whole bestSearch would
	// clear its arrays a second time.
	s.hs, s.o, s.bar, s.window = hs, o, bar, c.cfg.VerifyWindow
	s.n, s.probes, s.rounds, s.fellBack = 0, 0, 0, false
	mu := es[0].lane.mu
	mu.RLock()
	defer mu.RUnlock()
	for _, e := range es {
		s.add(e.lane, now)
	}
	w, ok := s.run()
	if !ok {
		return Result{}, 0, false
	}
	r := s.arr[w].l.result(now)
	r.Depth = s.arr[w].lo
	return r, o.gain(r.Depth, s.arr[w].icpt), true
}

// maxBestLanes bounds the lanes Best searches itself; a domain with more
// (more remote pools than a federation usually has) is answered by
// BestOf over Query. The bound keeps the search's state in fixed arrays
// on the stack, where writing it costs no allocation and no write
// barrier: in a profile of a version that kept it in a pooled heap
// object, copying the probes into it was about a sixth of a hot search.
const maxBestLanes = 16

// add makes l a contender if the objective admits it; the caller holds
// l.mu for reading.
func (s *bestSearch) add(l *Lane, now time.Time) {
	if icpt, ok := s.o.Intercept(l.view(now)); ok {
		hi := 0
		if l.f != nil {
			hi = len(s.hs)
		}
		s.arr[s.n] = contender{l: l, f: l.f, icpt: icpt, hi: hi}
		s.live[s.n] = int8(s.n)
		s.n++
		s.nlive = s.n
	}
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
}

// resolveWays is the number of positions of one lane's bracket read at
// once when its exact depth is wanted: a 64-block bracket takes two round
// trips to memory instead of a binary search's six.
const resolveWays = 7

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
// A round's probes do not depend on each other. The search locates them
// all, then reads them with filter.HitAll, whose read loop does nothing
// else, so that the round's cache misses are in flight together; a lane's
// exact depth is found the same way, resolveWays positions of its bracket
// at a time, so a 64-block bracket costs two round trips to memory
// instead of six. Spreading several positions over every lane's bracket
// in each round (a k-ary search over all lanes, 16 or 32 probes a round)
// was measured and was slower hot and no faster cold: it reads more cache lines than
// the round trips it saves are worth.
type bestSearch struct {
	hs     []routing.SeqHash
	o      Objective
	bar    float64
	window int
	arr    [maxBestLanes]contender // the contenders are arr[:n]
	n      int
	// live[:nlive] are the indices in arr of the lanes that can still
	// win, ascending, so that a round visits only those.
	live  [maxBestLanes]int8
	nlive int
	ps    [maxBestLanes]filter.Probe // a round's lookups
	hits  [maxBestLanes]uint64       // and their answers
	at    [maxBestLanes]int8         // the contender of each lookup
	// probes, rounds (reads of filter.HitAll) and fellBack are for the
	// tests and benchmarks.
	probes, rounds int
	fellBack       bool
}

// run returns the winner's index with its depth in lo (== hi).
func (s *bestSearch) run() (int, bool) {
	for {
		lead, leadGain := s.prune()
		if s.nlive == 0 {
			return 0, false
		}
		lc := &s.arr[lead]
		if s.nlive == 1 {
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
		probed := 0
		if leadGain <= s.bar || lc.lo == lc.hi {
			probed = s.beatingRound(lead, leadGain)
		} else {
			probed = s.midpointRound(leadGain)
		}
		if s.read(probed) && probed > 1 {
			// Every probe hit: settle the lead's depth, so that the next
			// round tests the others against it.
			if lead, _ = s.prune(); s.nlive > 0 {
				s.resolve(lead)
			}
		}
	}
}

// beatingRound locates, for every live lane but the lead, the least depth
// that would beat the lead's gain (the bar, when that is not above it) and
// returns the number of lookups.
func (s *bestSearch) beatingRound(lead int, leadGain float64) int {
	if leadGain <= s.bar {
		lead, leadGain = -1, s.bar
	}
	probed := 0
	for _, j := range s.live[:s.nlive] {
		if int(j) == lead {
			continue
		}
		// prune kept only lanes that can beat the lead (or tie it from
		// earlier), so the depth is in their bracket.
		c := &s.arr[j]
		if d := s.beating(c, leadGain, int(j) < lead); d <= c.hi {
			s.locate(probed, j, d)
			probed++
		}
	}
	return probed
}

// midpointRound locates, for every live lane whose depth is not exact,
// the depth at which its gain would reach the midpoint between the lead's
// known gain and the best possible one, and returns the number of
// lookups.
func (s *bestSearch) midpointRound(leadGain float64) int {
	hiGain := math.Inf(-1)
	for _, j := range s.live[:s.nlive] {
		c := &s.arr[j]
		hiGain = max(hiGain, s.o.gain(c.hi, c.icpt))
	}
	target := leadGain + (hiGain-leadGain)/2
	probed := 0
	for _, j := range s.live[:s.nlive] {
		if c := &s.arr[j]; c.lo < c.hi {
			s.locate(probed, j, s.reaching(c, target))
			probed++
		}
	}
	return probed
}

// locate makes lookup k the test of contender j at depth d.
func (s *bestSearch) locate(k int, j int8, d int) {
	c := &s.arr[j]
	c.next = d
	c.f.LocateInto(&s.ps[k], s.hs[d-1])
	s.at[k] = j
}

// read tests the round's lookups at once (filter.HitAll), narrows each
// probed bracket and reports whether every lookup hit.
func (s *bestSearch) read(probed int) bool {
	s.probes += probed
	s.rounds++
	filter.HitAll(s.ps[:probed], s.hits[:probed])
	allHit := true
	for k, j := range s.at[:probed] {
		c := &s.arr[j]
		if s.hits[k] == 1 {
			c.lo = c.next
		} else {
			c.hi, allHit = c.next-1, false
		}
	}
	return allHit
}

// prune drops from the live lanes those that cannot win and returns the
// lead (the live lane with the best known gain, the earliest of equals)
// with its known gain; the lead is -1 when no lane is left.
func (s *bestSearch) prune() (lead int, leadGain float64) {
	lead = -1
	k := 0
	for _, j := range s.live[:s.nlive] {
		c := &s.arr[j]
		if s.o.gain(c.hi, c.icpt) <= s.bar {
			continue
		}
		if g := s.o.gain(c.lo, c.icpt); lead < 0 || g > leadGain {
			lead, leadGain = int(j), g
		}
		s.live[k] = j
		k++
	}
	n := 0
	for _, j := range s.live[:k] {
		// A lane that can at best tie the lead stays only if it comes
		// before it.
		if g := s.o.gain(s.arr[j].hi, s.arr[j].icpt); int(j) != lead && (g < leadGain || (g == leadGain && lead < int(j))) {
			continue
		}
		s.live[n] = j
		n++
	}
	s.nlive = n
	return lead, leadGain
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

// resolve binary searches c's bracket down to its depth.
func (s *bestSearch) resolve(j int) {
	c := &s.arr[j]
	for c.lo < c.hi {
		// Up to resolveWays positions spread over (lo, hi], read at once,
		// narrow the bracket to one of resolveWays+1 parts.
		m := c.hi - c.lo
		k := min(m, resolveWays)
		lo := c.lo
		for i := range k {
			c.f.LocateInto(&s.ps[i], s.hs[lo+((i+1)*m+k)/(k+1)-1])
		}
		s.probes += k
		s.rounds++
		filter.HitAll(s.ps[:k], s.hits[:k])
		for i := range k {
			d := lo + ((i+1)*m+k)/(k+1)
			if s.hits[i] == 0 {
				c.hi = d - 1
				break
			}
			c.lo = d
		}
	}
}

// verified re-tests the window below the winner's depth, as prefixDepth
// does; its block lo-1 is the search's last hit and is not probed again.
func (s *bestSearch) verified(j int) bool {
	c := &s.arr[j]
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
	for j := range s.arr[:s.n] {
		c := &s.arr[j]
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
