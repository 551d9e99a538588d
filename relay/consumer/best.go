package consumer

import (
	"math"
	"math/bits"
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
// answers: Best(…) is BestOf(Query(…)) computed with fewer probes. The
// views it passes to o.Intercept point into rs, so the compiler moves a
// results array declared on the caller's stack to the heap.
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
	s.nq, s.np, s.nsp, s.nspread, s.nspreadFor = 0, 0, 0, 0, 0
	mu := es[0].lane.mu
	mu.RLock()
	defer mu.RUnlock()
	s.st = es[0].lane.ds.st
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
		col := -1
		if l.stacked && s.st != nil {
			col = l.col
		}
		// Field by field: a composite literal is built on the stack and
		// copied in 16-byte moves that its 8-byte stores cannot forward
		// to, which made this line a tenth of a search in cache.
		c := &s.arr[s.n]
		c.l, c.f, c.icpt = l, l.f, icpt
		c.lo, c.hi, c.next, c.want, c.from, c.col, c.own = 0, hi, 0, 0, 0, col, false
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
	want   int // the depth this round would probe it at alone
	// from: a round's spread is placed over (from, hi], the depths at
	// which a hit or a miss can change which lane wins.
	from int
	col  int // the lane's column in the stack, -1 for none
	// own: the lane's last probe read its own filter (not the stack), so
	// verification reads there too, where that probe's lines are.
	own bool
}

// resolveWays is the number of positions of one lane's bracket read at
// once when its exact depth is wanted: a 64-block bracket takes two round
// trips to memory instead of a binary search's six, and the bracket a
// spread round of spreadWays depths leaves over 64 blocks takes one.
const resolveWays = 8

// spreadWays is the most depths a round spreads over the stacked lanes'
// brackets.
const spreadWays = 8

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
// was measured and was slower hot and no faster cold: in the lanes' own
// filters it reads more cache lines than the round trips it saves are
// worth.
//
// Lanes in the domain's stack (stack.go) are searched that way all the
// same, because there a depth costs one lookup of two rows for all of
// them: every round of two or more stacked lanes probes them at up to
// spreadWays depths spread over their brackets (spreadStacked), a round
// against the bar from the least depth that would beat it. At the
// benchmark's mixed depths that finds the winner in 1.6 rounds of 14
// lookups in all, where the lanes' own filters take seven rounds of 60
// probes; a request no lane holds costs one round of nine lookups. A
// first round of one shared lookup at the depth that beats the bar, which
// settles that request with one, took a round more for every other.
//
// A spread covers only the depths where a probe can change the winner:
// for a lane other than the lead, those from the least at which it would
// beat the lead's known gain. With lanes whose DCs are at different
// distances that narrows the second round to the contested depths, and
// placing the spread by rank over them (not evenly over the span of all
// brackets) took that case from 2.5 rounds to 2.0. The depth below the
// top is probed with the top, since a lane that holds the whole request
// is verified there: without it, its verification was a round trip of its
// own after the search.
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
	// A round's probes: at[q] is the contender of probe q, which via[q]
	// says is lookup via[q] of the lanes' own filters (ps, hits) or
	// lookup -via[q]-1 of the stack (sps at depths, masks).
	at, via [maxBestLanes]int8
	nq      int
	ps      [maxBestLanes]filter.Probe
	hits    [maxBestLanes]uint64
	np      int
	st      *filter.Stack
	sps     [maxBestLanes + spreadWays + 1]filter.StackProbe
	depths  [maxBestLanes + spreadWays + 1]int
	masks   [maxBestLanes + spreadWays + 1]uint32
	nsp     int
	// A midpoint round's spread: the stacked lanes spreadFor are probed
	// at the stack lookups spread (ascending depths).
	spread     [spreadWays + 1]int8
	nspread    int
	spreadFor  [maxBestLanes]int8
	nspreadFor int
	// probes (lookups), rounds (reads of them) and fellBack are for the
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
		mid := !(leadGain <= s.bar || lc.lo == lc.hi)
		if mid {
			s.midpointRound(lead, leadGain)
		} else {
			s.beatingRound(lead, leadGain)
		}
		if allHit, lanes := s.read(); allHit && lanes > 1 {
			// Every probe of several lanes hit, which says nothing about
			// which of them leads (every lane may hold the whole prefix):
			// settle the lead's depth, so that the next round tests the
			// others against it. A stacked lead is settled only after a
			// midpoint round: after a round against the bar the next
			// midpoint round spreads over every stacked lane's bracket
			// at once, for fewer round trips.
			if lead, _ = s.prune(); s.nlive > 0 && (mid || s.arr[lead].col < 0) {
				s.resolve(lead)
			}
		}
	}
}

// beatingRound probes every live lane but the lead at the least depth
// that would beat the lead's gain (the bar, when that is not above it).
// Two or more stacked lanes are probed by spread instead, over the depths
// from the least they need up, that one included: a miss at or below the
// depth a lane needs settles it all the same, a hit narrows its bracket
// to about an eighth, and the lanes that hold the whole request are
// settled at its top depth.
func (s *bestSearch) beatingRound(lead int, leadGain float64) {
	if leadGain <= s.bar {
		lead, leadGain = -1, s.bar
	}
	for _, j := range s.live[:s.nlive] {
		if int(j) == lead {
			continue
		}
		// prune kept only lanes that can beat the lead (or tie it from
		// earlier), so the depth is in their bracket.
		c := &s.arr[j]
		d := s.beating(c, leadGain, int(j) < lead)
		if d > c.hi {
			continue
		}
		if c.col < 0 {
			s.queue(j, d)
			continue
		}
		c.want, c.from = d, d-1
		s.spreadFor[s.nspreadFor] = j
		s.nspreadFor++
	}
	if s.nspreadFor == 1 {
		// One stacked lane: its own probe.
		s.queue(s.spreadFor[0], s.arr[s.spreadFor[0]].want)
		s.nspreadFor = 0
		return
	}
	s.spreadStacked(true)
}

// midpointRound probes every live lane whose depth is not exact at the
// depth at which its gain would reach the midpoint between the lead's
// known gain and the best possible one, a binary search for the maximum
// over all lanes at once; the stacked lanes are probed by spread instead.
func (s *bestSearch) midpointRound(lead int, leadGain float64) {
	hiGain := math.Inf(-1)
	for _, j := range s.live[:s.nlive] {
		c := &s.arr[j]
		hiGain = max(hiGain, s.o.gain(c.hi, c.icpt))
	}
	target := leadGain + (hiGain-leadGain)/2
	for _, j := range s.live[:s.nlive] {
		c := &s.arr[j]
		if c.lo == c.hi {
			continue
		}
		if c.col < 0 {
			s.queue(j, s.reaching(c, target))
			continue
		}
		c.want, c.from = s.reaching(c, target), c.lo
		if int(j) != lead {
			// Below the depth that beats the lead a hit tells nothing.
			c.from = max(c.lo, s.beating(c, leadGain, int(j) < lead)-1)
		}
		s.spreadFor[s.nspreadFor] = j
		s.nspreadFor++
	}
	s.spreadStacked(false)
}

// spreadStacked probes the stacked lanes spreadFor at up to spreadWays
// depths spread over the union of their ranges (from, hi] (from their
// least wanted depth up, that depth included, if fromWant): each depth is
// one stack lookup for all of them, so a round narrows every stacked
// lane's range to about an eighth for the price of one lane's resolve
// step. A lane whose range falls between two of those depths is probed
// at the depth it wants.
func (s *bestSearch) spreadStacked(fromWant bool) {
	if s.nspreadFor == 0 {
		return
	}
	lo, hi := math.MaxInt, 0
	for _, j := range s.spreadFor[:s.nspreadFor] {
		c := &s.arr[j]
		lo, hi = min(lo, c.from), max(hi, c.hi)
	}
	if hi-lo <= 64 {
		s.spreadOverUnion(lo, hi, fromWant)
	} else {
		s.spreadEvenly(lo, hi, fromWant)
	}
	for _, j := range s.spreadFor[:s.nspreadFor] {
		c := &s.arr[j]
		covered := false
		for _, x := range s.spread[:s.nspread] {
			if d := s.depths[x]; d > c.from && d <= c.hi {
				covered = true
				break
			}
		}
		if !covered {
			s.queue(j, c.want)
		}
	}
}

// spreadOverUnion places the spread over the depths of the lanes' ranges,
// which lie in (lo, hi] with hi-lo at most 64, by rank: all of them when
// there are at most spreadWays, so that the round finds every such lane's
// depth; otherwise the first (if fromWant) and then evenly up to the
// top, hi, where lanes that hold all of it (every lane that holds the
// whole request) are settled at once. The depth below the top is added
// if the ranks skip it: it is where such a lane is verified, which would
// otherwise cost a round trip of its own after the search.
func (s *bestSearch) spreadOverUnion(lo, hi int, fromWant bool) {
	// Bit i of set is depth lo+1+i.
	var set uint64
	for _, j := range s.spreadFor[:s.nspreadFor] {
		c := &s.arr[j]
		if c.hi > c.from {
			set |= ^uint64(0) >> (64 - (c.hi - c.from)) << (c.from - lo)
		}
	}
	k := 0
	if n := bits.OnesCount64(set); n <= spreadWays {
		for u := set; u != 0; u &= u - 1 {
			s.spread[k] = s.stackLookup(lo + 1 + bits.TrailingZeros64(u))
			k++
		}
	} else {
		// Ranks off-1 + ⌈i(n-off)/ways⌉ for i = 1..ways, after rank 0
		// when off is 1: strictly ascending, as n-off > ways, and the
		// last is n-1, the top.
		off, ways := 0, spreadWays
		if fromWant {
			off, ways = 1, spreadWays-1
		}
		i, want := 1, off-1+(n-off+ways-1)/ways
		if off == 1 {
			i, want = 0, 0
		}
		// The set's runs of depths in turn: ranks [r, r+run) are depths
		// lo+1+at... of this one.
		for r, u := 0, set; u != 0 && i <= ways; {
			at := bits.TrailingZeros64(u)
			run := min(bits.TrailingZeros64(^(u >> at)), 64-at)
			for ; i <= ways && want < r+run; i++ {
				s.spread[k] = s.stackLookup(lo + 1 + at + want - r)
				k++
				want = off - 1 + ((i+1)*(n-off)+ways-1)/ways
			}
			r += run
			u &^= (^uint64(0) >> (64 - run)) << at
		}
		if hi-lo >= 2 && set>>(hi-lo-2)&1 == 1 {
			k = s.belowTop(k, hi)
		}
	}
	s.nspread = k
}

// belowTop adds depth hi-1 to the spread's k depths, whose last is hi,
// unless it is there, and returns their number; k is at least 2.
func (s *bestSearch) belowTop(k, hi int) int {
	if s.depths[s.spread[k-2]] != hi-1 {
		x := s.stackLookup(hi - 1)
		s.spread[k-1], s.spread[k] = x, s.spread[k-1]
		k++
	}
	return k
}

// spreadEvenly places the spread over (lo, hi], which is more than 64
// depths, as spreadOverUnion does when the lanes' ranges cover it: the
// least depth if fromWant, then evenly up to hi, and the depth below.
func (s *bestSearch) spreadEvenly(lo, hi int, fromWant bool) {
	k := 0
	if fromWant {
		lo++
		s.spread[k] = s.stackLookup(lo)
		k++
	}
	m := hi - lo
	ways := min(m, spreadWays-k)
	for i := range ways {
		s.spread[k] = s.stackLookup(lo + ((i+1)*m+ways-1)/ways)
		k++
	}
	s.nspread = s.belowTop(k, hi)
}

// queue adds contender j's probe at depth d to the round; read decides
// how it is looked up.
func (s *bestSearch) queue(j int8, d int) {
	s.arr[j].next = d
	s.at[s.nq] = j
	s.nq++
}

// stackLookup returns the index of the round's stack lookup at depth d,
// adding it if it is new.
func (s *bestSearch) stackLookup(d int) int8 {
	for k, kd := range s.depths[:s.nsp] {
		if kd == d {
			return int8(k)
		}
	}
	s.st.LocateInto(&s.sps[s.nsp], s.hs[d-1])
	s.depths[s.nsp] = d
	s.nsp++
	return int8(s.nsp - 1)
}

// lookups sets via for every queued probe: a stacked lane's probe shares
// the stack's lookup of its depth when another probe of the round needs
// it too (a stack lookup reads two rows, a lane's own probe two buckets);
// any other probe is a lookup in the lane's own filter.
func (s *bestSearch) lookups() {
	for q, j := range s.at[:s.nq] {
		c := &s.arr[j]
		if c.col >= 0 && s.shared(q, c.next) {
			s.via[q] = -s.stackLookup(c.next) - 1
			continue
		}
		c.f.LocateInto(&s.ps[s.np], s.hs[c.next-1])
		s.via[q] = int8(s.np)
		s.np++
	}
}

// shared reports whether a stack lookup at depth d serves more than the
// queued probe q: another stacked lane's probe, or a spread depth.
func (s *bestSearch) shared(q, d int) bool {
	for _, kd := range s.depths[:s.nsp] {
		if kd == d {
			return true
		}
	}
	for r, j := range s.at[:s.nq] {
		if r != q && s.arr[j].col >= 0 && s.arr[j].next == d {
			return true
		}
	}
	return false
}

// read tests the round's lookups at once (filter.Stack.Hits and
// filter.HitAll), narrows each probed bracket and empties the round. It
// reports whether every probe hit, and how many lanes were probed.
func (s *bestSearch) read() (allHit bool, lanes int) {
	s.lookups()
	s.probes += s.np + s.nsp
	s.rounds++
	if s.nsp > 0 {
		s.askColumns()
		s.st.Hits(s.sps[:s.nsp], s.masks[:s.nsp])
	}
	filter.HitAll(s.ps[:s.np], s.hits[:s.np])
	queued, qHit := s.narrowQueued()
	spread, sHit := s.narrowSpread()
	s.nq, s.np, s.nsp, s.nspread, s.nspreadFor = 0, 0, 0, 0, 0
	return qHit && sHit, bits.OnesCount32(queued | spread)
}

// askColumns sets masks[x] to the columns stack lookup x is to test: the
// lanes whose queued probe it serves, and the spread lanes whose bracket
// holds its depth, so that filter.Stack.Hits reads only the lines of the
// rows that hold those (a line is 8 columns). In the later rounds of a
// search whose lanes need different depths, each depth is in about one
// lane's bracket; asking for only that lane made those searches faster
// at the median. A round of more than askLanes spread lanes (the
// first) asks every lookup for all of them instead, which reads no more
// lines, since each line of a row holds some of them, and saves the
// pairing of lanes with depths.
func (s *bestSearch) askColumns() {
	if s.nspreadFor > askLanes {
		var all uint32
		for q, j := range s.at[:s.nq] {
			if s.via[q] < 0 {
				all |= 1 << s.arr[j].col
			}
		}
		for _, j := range s.spreadFor[:s.nspreadFor] {
			all |= 1 << s.arr[j].col
		}
		for x := range s.masks[:s.nsp] {
			s.masks[x] = all
		}
		return
	}
	for x := range s.masks[:s.nsp] {
		s.masks[x] = 0
	}
	for q, j := range s.at[:s.nq] {
		if v := s.via[q]; v < 0 {
			s.masks[-v-1] |= 1 << s.arr[j].col
		}
	}
	for _, j := range s.spreadFor[:s.nspreadFor] {
		c := &s.arr[j]
		for _, x := range s.spread[:s.nspread] {
			if d := s.depths[x]; d > c.hi {
				break
			} else if d > c.lo {
				s.masks[x] |= 1 << c.col
			}
		}
	}
}

// askLanes is the most spread lanes for which askColumns asks each
// lookup for only the lanes it serves.
const askLanes = 4

// narrowQueued narrows the brackets of the round's queued probes and
// returns the set of their lanes and whether every probe hit.
func (s *bestSearch) narrowQueued() (lanes uint32, allHit bool) {
	allHit = true
	for q, j := range s.at[:s.nq] {
		lanes |= 1 << j
		c := &s.arr[j]
		hit := false
		if v := s.via[q]; v >= 0 {
			hit, c.own = s.hits[v] == 1, true
		} else {
			hit, c.own = s.masks[-v-1]>>c.col&1 == 1, false
		}
		if hit {
			c.lo = c.next
		} else {
			c.hi, allHit = c.next-1, false
		}
	}
	return lanes, allHit
}

// narrowSpread narrows the brackets of the lanes probed by spread and
// returns their set and whether every depth in their brackets hit. The
// spread depths ascend: a lane's depth is below its first miss inside its
// bracket (a hit above a miss is a false positive).
func (s *bestSearch) narrowSpread() (lanes uint32, allHit bool) {
	allHit = true
	for _, j := range s.spreadFor[:s.nspreadFor] {
		c := &s.arr[j]
		lanes |= 1 << j
		c.own = false
		for _, k := range s.spread[:s.nspread] {
			d := s.depths[k]
			if d <= c.lo || d > c.hi {
				continue
			}
			if s.masks[k]>>c.col&1 == 0 {
				c.hi, allHit = d-1, false
				break
			}
			c.lo = d
		}
	}
	return lanes, allHit
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
	c.own = true
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
// A stacked lane is re-tested in its column, whose rows the last spread
// round has usually just read, unless its last probe read its own filter
// (its depth was resolved there), whose lines are then the ones in cache.
func (s *bestSearch) verified(j int) bool {
	c := &s.arr[j]
	inStack := c.col >= 0 && !c.own
	for p := max(c.lo-s.window, 1); p < c.lo-1; p++ {
		s.probes++
		if inStack && !s.st.Contains(c.col, s.hs[p]) || !inStack && !c.f.Contains(s.hs[p]) {
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
