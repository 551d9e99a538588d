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
	st *filter.Stack // nil until two ready lanes share a geometry
	// lanes[k] is the lane that owns column k, nil for a free column;
	// every lane of the domain has one. A restack numbers the columns
	// afresh; lanes added later take free columns, and removed lanes free
	// theirs, so that neither copies the others' filters again.
	lanes []*Lane
	gen   uint64 // counts restacks
	off   bool   // Config.NoStack: never build one
}

// restack rebuilds the stack of lanes (all of one domain's) under their
// write lock, when the domain's lane set changed in a way the stack's free
// columns cannot absorb (restackDomain) or a snapshot brought a geometry
// more lanes share than the stack's: column k for lanes[k], the geometry
// the most ready lanes share, every fitting lane's filter loaded. A domain of more than filter.MaxStackWidth lanes, one
// where no two ready lanes share a geometry, or a consumer with
// Config.NoStack, has no stack, nor has the session summary's domain. The
// caller holds the lock.
func restack(ds *domainStack, lanes []*Lane) {
	ds.st, ds.lanes = nil, slices.Clone(lanes)
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
	// The columns past the lanes' are free for lanes that join.
	for len(ds.lanes) < st.Width() {
		ds.lanes = append(ds.lanes, nil)
	}
}

// commonGeometry returns the filter, among the ready lanes', whose
// geometry the most lanes share (the earliest of equals), or nil.
func commonGeometry(lanes []*Lane) *filter.Cuckoo {
	var best *filter.Cuckoo
	most := 0
	for _, l := range lanes {
		if l == nil || l.f == nil {
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
		if l != nil && l.f != nil && l.f.SameGeometry(f) {
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
		restack(ds, slices.DeleteFunc(slices.Clone(ds.lanes), func(o *Lane) bool { return o == nil }))
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
// goroutine writes the lane, so no delta lands meanwhile; a restack ends
// the copy, having loaded the lane itself, and so does the lane's
// removal, which frees its column.
func (l *Lane) loadColumn(f *filter.Cuckoo, gen uint64) {
	ds := l.ds
	n := f.Buckets()
	for from := 0; from < n; from += loadChunk {
		l.mu.Lock()
		if ds.gen != gen || l.f != f || l.col < 0 {
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
		if l != nil && l.stacked {
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

// restackDomain updates the stack of domain d's lanes after the lane set
// changed from old to the current one; the caller holds c.mu. Lanes that
// left the domain free their column first, so that their goroutines,
// which may apply one more event before they stop, no longer write the
// stack. Lanes that joined take free columns: a new lane has no filter
// yet, so nothing is copied, and the domain's queries wait for none of
// it. Only when the stack has no free column, or there is no stack yet,
// is it rebuilt, which copies every ready lane's filter under the lock
// (BenchmarkStackLoad: about 7 ms per lane of the default size). The
// stack's width is a power of two, so rebuilds for growth are rare.
func (c *Consumer) restackDomain(old []*laneEntry, d producer.Domain) {
	es := c.lanes.Load().byDomain[d]
	all := append(slices.Clone(old), es...)
	if len(all) == 0 {
		return
	}
	l0 := all[0].lane
	l0.mu.Lock()
	defer l0.mu.Unlock()
	ds := l0.ds
	current := make(map[*Lane]bool, len(es))
	for _, e := range es {
		current[e.lane] = true
	}
	for _, e := range old {
		if l := e.lane; !current[l] {
			if l.col >= 0 && l.col < len(ds.lanes) && ds.lanes[l.col] == l {
				ds.lanes[l.col] = nil
			}
			l.col, l.stacked = -1, false
		}
	}
	// The session summary's lanes are only asked for every lane's answer
	// (Query), which reads their own filters: a stack would be memory and
	// load time for nothing.
	ds.off = c.cfg.NoStack || d == producer.SessionDomain
	lanes := make([]*Lane, len(es))
	for k, e := range es {
		lanes[k] = e.lane
	}
	if ds.st != nil && !ds.off && keeps(ds, lanes) && joinFree(ds, lanes) {
		return
	}
	restack(ds, lanes)
}

// keeps reports whether ds's stack still serves lanes: at least two of
// them fit it, and no other geometry is shared by more.
func keeps(ds *domainStack, lanes []*Lane) bool {
	fits := 0
	for _, l := range lanes {
		if ds.st.Fits(l.f) {
			fits++
		}
	}
	like := commonGeometry(lanes)
	return fits >= 2 && (like == nil || sharing(lanes, like) <= fits)
}

// joinFree gives each of lanes that has no column a free column of ds's
// stack, if there are enough, and reports whether there were. A lane
// that is ready and fits the stack is loaded into its column.
func joinFree(ds *domainStack, lanes []*Lane) bool {
	free := 0
	for _, o := range ds.lanes {
		if o == nil {
			free++
		}
	}
	for _, l := range lanes {
		if l.col < 0 {
			free--
		}
	}
	if free < 0 {
		return false
	}
	for _, l := range lanes {
		if l.col >= 0 {
			continue
		}
		l.col = slices.Index(ds.lanes, nil)
		ds.lanes[l.col] = l
		if ds.st.Fits(l.f) {
			ds.st.Load(l.col, l.f)
			l.stacked = true
		}
	}
	return true
}
