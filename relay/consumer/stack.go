package consumer

import (
	"slices"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// domainStack is the transposed replica (filter.Stack) of the filters of
// one cache domain's lanes that share a geometry, which Best's rounds
// read: at one depth, every stacked lane costs one lookup of two rows
// instead of two cache lines each. Relays build their pools' filters with
// one seed and one default size, so a domain's lanes normally share a
// geometry; a pool that grew into a larger filter, or a lane of another
// kind, is searched through its own filter instead.
//
// Every field, and each lane's col and stacked, is written under the
// domain's write lock and read under its read lock, like the lanes'
// filters: a stacked lane's column equals its filter whenever the lock is
// free.
type domainStack struct {
	st    *filter.Stack // nil until some lane of the domain is ready
	lanes []*Lane       // the domain's lanes; lanes[k] owns column k
	gen   uint64        // counts restacks
	off   bool          // Config.NoStack: never build one
}

// restack rebuilds the stack of lanes (one domain's, in DC order) under
// their write lock, after the domain's lane set changed or a snapshot
// brought a geometry more lanes share than the stack's: a column per
// lane, the geometry the most ready lanes share, every fitting lane's
// filter loaded. A domain of more than filter.MaxStackWidth lanes, one
// where no two ready lanes share a geometry, or a consumer with
// Config.NoStack, has no stack, nor has the session summary's domain. The
// caller holds the lock.
func restack(ds *domainStack, lanes []*Lane) {
	ds.st, ds.lanes = nil, lanes
	ds.gen++
	for k, l := range lanes {
		l.col, l.stacked = k, false
	}
	like := commonGeometry(lanes)
	if ds.off || like == nil || len(lanes) > filter.MaxStackWidth || sharing(lanes, like) < 2 {
		return
	}
	// The width is valid: 1 <= len(lanes) <= MaxStackWidth.
	st, _ := filter.NewStack(like, len(lanes))
	for k, l := range lanes {
		if st.Fits(l.f) {
			st.Load(k, l.f)
			l.stacked = true
		}
	}
	ds.st = st
}

// commonGeometry returns the filter, among the ready lanes', whose
// geometry the most lanes share (the earliest of equals), or nil.
func commonGeometry(lanes []*Lane) *filter.Cuckoo {
	var best *filter.Cuckoo
	most := 0
	for _, l := range lanes {
		if l.f == nil {
			continue
		}
		if n := sharing(lanes, l.f); n > most {
			best, most = l.f, n
		}
	}
	return best
}

// sharing counts the lanes whose filter has f's geometry.
func sharing(lanes []*Lane, f *filter.Cuckoo) int {
	n := 0
	for _, l := range lanes {
		if l.f != nil && l.f.SameGeometry(f) {
			n++
		}
	}
	return n
}

// snapshotted updates l's column after l.f was replaced by a snapshot;
// the caller holds the domain's write lock. The lane leaves the stack at
// once. A filter that fits the stack is to be loaded into the column by
// loadColumn, after the caller unlocks, which snapshotted reports; one
// that does not fit stays out, unless more of the domain's lanes share its
// geometry than the stack holds, which rebuilds the stack around it here
// (pools that grew together move together).
func (l *Lane) snapshotted() (load bool, gen uint64) {
	ds := l.ds
	if ds == nil || l.col < 0 {
		return false, 0
	}
	l.stacked = false
	if ds.st != nil && ds.st.Fits(l.f) {
		return true, ds.gen
	}
	if n := sharing(ds.lanes, l.f); n > 1 && n > stackedCount(ds.lanes) {
		restack(ds, ds.lanes)
	}
	return false, 0
}

// loadChunk is the number of buckets loadColumn copies per hold of the
// write lock: about half a millisecond, against 7 ms for a whole 2^19-
// bucket filter (BenchmarkStackLoad), for which every query of the domain
// would wait.
const loadChunk = 1 << 15

// loadColumn copies f, the lane's new filter, into its column a chunk at
// a time, taking the domain's write lock for each, and stacks the lane
// when the copy is whole; gen is the stack's generation when snapshotted
// asked for it. Until then queries search the lane in f. Only the lane's
// goroutine writes the lane, so no delta lands meanwhile; a restack (the
// domain's lanes changed) ends the copy, having loaded the lane itself.
func (l *Lane) loadColumn(f *filter.Cuckoo, gen uint64) {
	ds := l.ds
	n := f.Buckets()
	for from := 0; from < n; from += loadChunk {
		l.mu.Lock()
		if ds.gen != gen || l.f != f {
			l.mu.Unlock()
			return
		}
		ds.st.LoadRange(l.col, f, uint64(from), uint64(min(from+loadChunk, n)))
		l.stacked = from+loadChunk >= n
		l.mu.Unlock()
	}
}

// stackedCount counts the stacked lanes.
func stackedCount(lanes []*Lane) int {
	n := 0
	for _, l := range lanes {
		if l.stacked {
			n++
		}
	}
	return n
}

// delta mirrors a delta that l.f accepted into l's column; the caller
// holds the domain's write lock.
func (l *Lane) delta(d filter.Delta) {
	if l.stacked {
		l.ds.st.Apply(l.col, d)
	}
}

// restackDomain rebuilds the stack of domain d's lanes after the lane set
// changed from old to the current one; the caller holds c.mu. Lanes that
// left the domain lose their column first, so that their goroutines, which
// may apply one more event before they stop, no longer write the stack.
func (c *Consumer) restackDomain(old []*laneEntry, d producer.Domain) {
	es := c.lanes.Load().byDomain[d]
	all := append(slices.Clone(old), es...)
	if len(all) == 0 {
		return
	}
	l0 := all[0].lane
	l0.mu.Lock()
	defer l0.mu.Unlock()
	for _, e := range old {
		e.lane.col, e.lane.stacked = -1, false
	}
	lanes := make([]*Lane, len(es))
	for k, e := range es {
		lanes[k] = e.lane
	}
	// The session summary's lanes are only asked for every lane's answer
	// (Query), which reads their own filters: a stack would be memory and
	// load time for nothing.
	l0.ds.off = c.cfg.NoStack || d == producer.SessionDomain
	restack(l0.ds, lanes)
}
