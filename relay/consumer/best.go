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
// in registers; a view that carried the DC's name or the Load by value
// was assembled in memory for each call, at a third of the cost of a
// search that no lane answers. Pool and Load point into the lane's state
// or the Result: they are valid for the call only and must not be
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

// gain is the objective at depth d for a lane with the given intercept.
func (o Objective) gain(d int, intercept float64) float64 { return float64(d)*o.Slope + intercept }

// BestOf returns the result of rs with the greatest gain under o, the
// earliest of equals, if that gain exceeds minGain. It defines what Best
// answers: Best(…) is BestOf(Query(…)) computed with fewer probes.
func BestOf(rs []Result, o Objective, minGain float64) (Result, float64, bool) {
	var best Result
	var gain float64
	found := false
	for i := range rs {
		r := &rs[i]
		intercept, ok := o.Intercept(r.View())
		if !ok {
			continue
		}
		if g := o.gain(r.Depth, intercept); g > minGain && (!found || g > gain) {
			best, gain, found = *r, g, true
		}
	}
	return best, gain, found
}

// Best answers the question a DC decision asks of the lanes of domain:
// which one, if any, gains more than minGain under o with its prefix of
// hs, and how deep that prefix is. The answer is BestOf over Query's
// results whenever the filters have no false positive at the positions
// either search probes; like Query, it assumes prefix-monotone
// membership.
//
// Query finds every lane's depth, about a dozen dependent probes per lane
// at mixed depths. Best searches for the maximum instead, in rounds over
// the lanes still able to win (see bestSearch): a lane that cannot beat
// the best gain already established is settled by one probe, at the depth
// it would need, or by none, and only the winner's depth is found exactly
// and verified. docs/benchmarks.md has the figures.
func (c *Consumer) Best(domain producer.Domain, hs []routing.SeqHash, now time.Time, o Objective, minGain float64) (Result, float64, bool) {
	var s bestSearch
	return c.best(&s, domain, hs, now, o, minGain)
}

// best is Best with the search's state in s (on Best's stack).
func (c *Consumer) best(s *bestSearch, domain producer.Domain, hs []routing.SeqHash, now time.Time, o Objective, minGain float64) (Result, float64, bool) {
	es := c.lanes.Load().byDomain[domain]
	if len(es) == 0 {
		return Result{}, 0, false
	}
	if len(es) > maxBestLanes {
		return BestOf(c.Query(nil, domain, hs, now), o, minGain)
	}
	// The fields are set one by one: assigning a whole bestSearch would
	// clear its arrays a second time.
	s.hs, s.o, s.minGain, s.window = hs, o, minGain, c.cfg.VerifyWindow
	s.n, s.nq, s.np, s.nb, s.probes, s.rounds, s.fellBack = 0, 0, 0, 0, 0, 0, false
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
	return r, o.gain(r.Depth, s.arr[w].intercept), true
}

// maxBestLanes bounds the lanes Best searches itself; a domain with more
// (more remote pools than a federation usually has) is answered by
// BestOf over Query. The bound keeps the search's state in fixed arrays
// on the stack, where writing it costs no allocation and no write
// barrier: in a profile of a version that kept it in a pooled heap
// object, copying the probes into it was about a sixth of a hot search.
const maxBestLanes = 16

// add makes l a candidate if the objective admits it; the caller holds
// l.mu for reading.
func (s *bestSearch) add(l *Lane, now time.Time) {
	intercept, ok := s.o.Intercept(l.view(now))
	if !ok {
		return
	}
	hi := 0
	if l.f != nil {
		hi = len(s.hs)
	}
	c := &s.arr[s.n]
	c.l, c.f, c.intercept, c.lo, c.hi, c.next = l, l.f, intercept, 0, hi, 0
	c.cuckoo, _ = l.f.(*filter.Cuckoo)
	s.live[s.n] = int8(s.n)
	s.n++
	s.nlive = s.n
}

// candidate is one lane's state in a bestSearch: its depth is known to
// lie in [lo, hi] (lo blocks probed present, block hi probed absent or hi
// the request's length).
type candidate struct {
	l *Lane
	f filter.Summary
	// cuckoo is f if it is a cuckoo filter, whose lookups can be located
	// first and read together; nil for a Bloom filter.
	cuckoo    *filter.Cuckoo
	intercept float64
	lo, hi    int
	next      int // the depth this round probes
}

// resolveWays is the number of positions of one lane's bracket read at
// once when its exact depth is wanted: a 64-block bracket takes two round
// trips to memory instead of a binary search's six.
const resolveWays = 8

// bestSearch finds the candidate with the greatest gain. Each round
// first drops every lane that cannot win: one whose best possible gain
// (at hi) does not exceed minGain, or does not exceed the largest gain
// some lane is known to reach (at its lo; on a tie the earlier lane
// wins). That lane with the largest known gain is the leader. Then it
// probes every remaining lane once, at a position chosen by the state of
// the leader:
//
//   - no lane is known to exceed minGain, or the leader's depth is exact
//     (a beating round): each other lane is probed at the least depth
//     that would beat it. A miss settles the lane, which is what makes
//     lanes without the prefix, or shallower than the leader, cost one
//     probe;
//   - otherwise (a midpoint round) the lanes are probed at the depth
//     where they would reach the midpoint between the leader's known gain
//     and the best possible one, a binary search for the maximum over all
//     lanes at once.
//
// A round in which every probed lane hits says nothing about which of
// them leads, which is the case when all lanes hold the whole prefix; the
// leader then has its depth found exactly, so the next round settles the
// others against it. When one lane is left, its depth is found, and the
// window below it re-tested as in prefixDepth; if that finds a false
// positive, the search falls back to every lane's full prefixDepth.
//
// A round's probes do not depend on each other. The search locates them
// all, then reads them with filter.HitAll, whose read loop does nothing
// else, so that the round's cache misses are in flight together; a lane's
// exact depth is found the same way, resolveWays positions of its bracket
// at a time. Probing several positions of every lane's bracket in each
// round (a k-ary search over all lanes) was measured and was slower hot
// and no faster cold: it reads more cache lines than the round trips it
// saves are worth.
type bestSearch struct {
	hs      []routing.SeqHash
	o       Objective
	minGain float64
	window  int
	arr     [maxBestLanes]candidate // the candidates are arr[:n]
	n       int
	// live[:nlive] are the indices in arr of the lanes that can still
	// win, ascending, so that a round visits only those.
	live  [maxBestLanes]int8
	nlive int
	// A round's probes: probe q is candidate at[q]'s, and its answer (1
	// present, 0 absent) is answers[src[q]]. A cuckoo lane's probe is
	// located in ps[k] and HitAll answers it in answers[k]; a Bloom
	// lane's is answered when it is queued, in answers[maxBestLanes+k],
	// since its lookup is the library's k bit reads, which cannot be
	// split.
	at, src    [maxBestLanes]int8
	nq, np, nb int
	ps         [maxBestLanes]filter.Probe
	answers    [2 * maxBestLanes]uint64
	// probes (lookups), rounds (reads of them) and fellBack are for the
	// tests and benchmarks.
	probes, rounds int
	fellBack       bool
}

// run returns the winner's index with its depth in lo (== hi).
func (s *bestSearch) run() (int, bool) {
	for {
		leader, leaderGain := s.prune()
		if s.nlive == 0 {
			return 0, false
		}
		lc := &s.arr[leader]
		if s.nlive == 1 {
			if lc.lo < lc.hi {
				// Found exactly, it may yet fall below minGain.
				s.resolve(leader)
				continue
			}
			if s.verified(leader) {
				return leader, true
			}
			return s.fallback()
		}
		if leaderGain <= s.minGain || lc.lo == lc.hi {
			s.beatingRound(leader, leaderGain)
		} else {
			s.midpointRound(leaderGain)
		}
		if allHit, lanes := s.read(); allHit && lanes > 1 {
			// Every probe of several lanes hit, which says nothing about
			// which of them leads (every lane may hold the whole prefix):
			// settle the leader's depth, so that the next round tests the
			// others against it.
			if leader, _ = s.prune(); s.nlive > 0 {
				s.resolve(leader)
			}
		}
	}
}

// beatingRound probes every live lane but the leader at the least depth
// that would beat the leader's gain (minGain, when that is not above it).
func (s *bestSearch) beatingRound(leader int, leaderGain float64) {
	if leaderGain <= s.minGain {
		leader, leaderGain = -1, s.minGain
	}
	for _, j := range s.live[:s.nlive] {
		if int(j) == leader {
			continue
		}
		// prune kept only lanes that can beat the leader (or tie it from
		// earlier), so the depth is in their bracket.
		c := &s.arr[j]
		if d := s.beating(c, leaderGain, int(j) < leader); d <= c.hi {
			s.queue(j, d)
		}
	}
}

// midpointRound probes every live lane whose depth is not exact at the
// depth at which its gain would reach the midpoint between the leader's
// known gain and the best possible one.
func (s *bestSearch) midpointRound(leaderGain float64) {
	hiGain := math.Inf(-1)
	for _, j := range s.live[:s.nlive] {
		c := &s.arr[j]
		hiGain = max(hiGain, s.o.gain(c.hi, c.intercept))
	}
	target := leaderGain + (hiGain-leaderGain)/2
	for _, j := range s.live[:s.nlive] {
		if c := &s.arr[j]; c.lo < c.hi {
			s.queue(j, s.reaching(c, target))
		}
	}
}

// queue adds candidate j's probe at depth d to the round.
func (s *bestSearch) queue(j int8, d int) {
	c := &s.arr[j]
	c.next = d
	s.at[s.nq] = j
	if c.cuckoo != nil {
		c.cuckoo.LocateInto(&s.ps[s.np], s.hs[d-1])
		s.src[s.nq] = int8(s.np)
		s.np++
	} else {
		s.answers[maxBestLanes+s.nb] = present(c.f, s.hs[d-1])
		s.src[s.nq] = int8(maxBestLanes + s.nb)
		s.nb++
	}
	s.nq++
}

// present is f's answer for h as a HitAll answer: 1 present, 0 absent.
func present(f filter.Summary, h routing.SeqHash) uint64 {
	if f.Contains(h) {
		return 1
	}
	return 0
}

// read tests the round's probes at once (filter.HitAll), narrows each
// probed bracket and empties the round. It reports whether every probe
// hit, and how many lanes were probed (one probe each).
func (s *bestSearch) read() (allHit bool, lanes int) {
	s.probes += s.nq
	s.rounds++
	filter.HitAll(s.ps[:s.np], s.answers[:s.np])
	allHit = true
	for q, j := range s.at[:s.nq] {
		c := &s.arr[j]
		if s.answers[s.src[q]] == 1 {
			c.lo = c.next
		} else {
			c.hi, allHit = c.next-1, false
		}
	}
	lanes, s.nq, s.np, s.nb = s.nq, 0, 0, 0
	return allHit, lanes
}

// prune drops from the live lanes those that cannot win and returns the
// leader (the live lane with the best known gain, the earliest of equals)
// with its known gain; the leader is -1 when no lane is left.
func (s *bestSearch) prune() (leader int, leaderGain float64) {
	leader = -1
	k := 0
	for _, j := range s.live[:s.nlive] {
		c := &s.arr[j]
		if s.o.gain(c.hi, c.intercept) <= s.minGain {
			continue
		}
		if g := s.o.gain(c.lo, c.intercept); leader < 0 || g > leaderGain {
			leader, leaderGain = int(j), g
		}
		s.live[k] = j
		k++
	}
	n := 0
	for _, j := range s.live[:k] {
		// A lane that can at best tie the leader stays only if it comes
		// before it.
		if g := s.o.gain(s.arr[j].hi, s.arr[j].intercept); int(j) != leader && (g < leaderGain || (g == leaderGain && leader < int(j))) {
			continue
		}
		s.live[n] = j
		n++
	}
	s.nlive = n
	return leader, leaderGain
}

// beating returns the least depth in (c.lo, c.hi+1] at which c's gain
// exceeds g (reaches it, when orEqual); c.hi+1 means none does.
func (s *bestSearch) beating(c *candidate, g float64, orEqual bool) int {
	d := c.hi + 1
	if s.o.Slope > 0 {
		if x := math.Floor((g-c.intercept)/s.o.Slope) + 1; x < float64(d) {
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
func (s *bestSearch) wins(c *candidate, d int, g float64, orEqual bool) bool {
	v := s.o.gain(d, c.intercept)
	return v > g || (orEqual && v == g)
}

// reaching returns a depth in (c.lo, c.hi] near where c's gain reaches
// target.
func (s *bestSearch) reaching(c *candidate, target float64) int {
	d := c.hi
	if s.o.Slope > 0 {
		if x := math.Ceil((target - c.intercept) / s.o.Slope); x < float64(d) {
			d = int(x)
		}
	}
	return min(max(d, c.lo+1), c.hi)
}

// resolve narrows candidate j's bracket down to its depth.
func (s *bestSearch) resolve(j int) {
	c := &s.arr[j]
	for c.lo < c.hi {
		// Up to resolveWays positions evenly over (lo, hi], read at once,
		// narrow the bracket to one of resolveWays+1 parts.
		m := c.hi - c.lo
		k := min(m, resolveWays)
		lo := c.lo
		for i := range k {
			h := s.hs[lo+((i+1)*m+k)/(k+1)-1]
			if c.cuckoo != nil {
				c.cuckoo.LocateInto(&s.ps[i], h)
			} else {
				s.answers[i] = present(c.f, h)
			}
		}
		s.probes += k
		s.rounds++
		if c.cuckoo != nil {
			filter.HitAll(s.ps[:k], s.answers[:k])
		}
		for i := range k {
			d := lo + ((i+1)*m+k)/(k+1)
			if s.answers[i] == 0 {
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
		s.probes++
		if !c.f.Contains(s.hs[p]) {
			return false
		}
	}
	return true
}

// fallback answers from every lane's full prefixDepth, after
// verification found that a false positive misled the search.
func (s *bestSearch) fallback() (int, bool) {
	s.fellBack = true
	w, minGain := -1, s.minGain
	for j := range s.arr[:s.n] {
		c := &s.arr[j]
		c.lo = 0
		if c.f != nil {
			c.lo = prefixDepth(c.f, s.hs, s.window)
		}
		c.hi = c.lo
		if g := s.o.gain(c.lo, c.intercept); g > minGain {
			w, minGain = j, g
		}
	}
	return w, w >= 0
}
