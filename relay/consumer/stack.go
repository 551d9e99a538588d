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
// Every field, and each lane's col, stacked and loading, is written
// under the domain's write lock and read under its read lock, like the
// lanes' filters: a stacked lane's column equals its filter whenever the
// lock is free. Filling a column copies a whole filter, about 7 ms for
// the default size, so it is never done in one hold of the lock: columns
// are filled a chunk per hold (loadColumn), by whoever caused the fill,
// while queries search those lanes in their own filters, and deltas that
// land meanwhile are applied to the column as well (a delta carries whole
// bucket images, so a chunk copied later holds them too).
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
// the most ready lanes share. It returns the columns to fill, one per
// fitting lane, which the caller passes to loadColumns after it unlocks.
// A domain of more than filter.MaxStackWidth lanes, one where no two ready
// lanes share a geometry, or a consumer with Config.NoStack, has no
// stack, nor has the session summary's domain. The caller holds the lock.
func restack(ds *domainStack, lanes []*Lane) []columnLoad {
	ds.st, ds.lanes = nil, slices.Clone(lanes)
	ds.gen++
	for k, l := range lanes {
		l.col, l.stacked, l.loading = k, false, false
	}
	like := commonGeometry(lanes)
	if ds.off || like == nil || len(lanes) > filter.MaxStackWidth || sharing(lanes, like) < 2 {
		return nil
	}
	// The width is valid: 1 <= len(lanes) <= MaxStackWidth.
	st, _ := filter.NewStack(like, len(lanes))
	var loads []columnLoad
	for _, l := range lanes {
		if st.Fits(l.f) {
			l.loading = true
			loads = append(loads, columnLoad{l: l, f: l.f})
		}
	}
	ds.st = st
	// The columns past the lanes' are free for lanes that join.
	for len(ds.lanes) < st.Width() {
		ds.lanes = append(ds.lanes, nil)
	}
	return loads
}

// columnLoad is a column to fill: lane l's, with its filter f.
type columnLoad struct {
	l *Lane
	f *filter.Cuckoo
}

// loadColumns fills the columns of loads, which a change of stack
// generation gen asked for; the caller does not hold the lock.
func loadColumns(loads []columnLoad, gen uint64) {
	for _, ld := range loads {
		ld.l.loadColumn(ld.f, gen)
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
// once. A filter that fits the stack is to be loaded into the column; one
// that does not fit stays out, unless more of the domain's lanes share its
// geometry than the stack holds, which rebuilds the stack around it here
// (pools that grew together move together). It returns the columns to
// fill, with the stack generation, for loadColumns after the caller
// unlocks.
func (l *Lane) snapshotted() ([]columnLoad, uint64) {
	ds := l.ds
	if ds == nil || l.col < 0 {
		return nil, 0
	}
	l.stacked, l.loading = false, false
	if ds.st != nil && ds.st.Fits(l.f) {
		l.loading = true
		return []columnLoad{{l: l, f: l.f}}, ds.gen
	}
	if n := sharing(ds.lanes, l.f); n > 1 && n > inStack(ds.lanes) {
		return restack(ds, slices.DeleteFunc(slices.Clone(ds.lanes), func(o *Lane) bool { return o == nil })), ds.gen
	}
	return nil, 0
}

// loadChunk is the number of buckets loadColumn copies per hold of the
// write lock: about half a millisecond, against 7 ms for a whole 2^19-
// bucket filter (BenchmarkStackLoad), for which every query of the domain
// would wait.
const loadChunk = 1 << 15

// loadColumn copies f, the lane's filter, into its column a chunk at a
// time, taking the domain's write lock for each, and stacks the lane when
// the copy is whole; gen is the stack's generation when the copy was
// asked for. Until then queries search the lane in f. Deltas f accepts
// meanwhile reach the column too (delta). The copy ends early if the
// stack was rebuilt (the rebuild asks for its own), if the lane has a
// newer snapshot (which asks for its own) or if it was removed.
func (l *Lane) loadColumn(f *filter.Cuckoo, gen uint64) {
	ds := l.ds
	n := f.Buckets()
	for from := 0; from < n; from += loadChunk {
		l.mu.Lock()
		// A removed lane, or one whose new snapshot does not fit, is not
		// loading any more.
		if ds.gen != gen || l.f != f || !l.loading {
			l.mu.Unlock()
			return
		}
		ds.st.LoadRange(l.col, f, uint64(from), uint64(min(from+loadChunk, n)))
		done := from+loadChunk >= n
		l.stacked, l.loading = done, !done
		l.mu.Unlock()
	}
}

// inStack counts the lanes in the stack: stacked, or with their column
// being filled (a rebuild's lanes are, until loadColumns is done).
func inStack(lanes []*Lane) int {
	n := 0
	for _, l := range lanes {
		if l != nil && (l.stacked || l.loading) {
			n++
		}
	}
	return n
}

// delta mirrors a delta that l.f accepted into l's column, also while
// the column is being filled; the caller holds the domain's write lock.
func (l *Lane) delta(d filter.Delta) {
	if l.stacked || l.loading {
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
// is it rebuilt, which copies every ready lane's filter (BenchmarkStackLoad:
// about 7 ms per lane of the default size), a chunk per hold of the lock,
// after the change. The stack's width is a power of two, so rebuilds for
// growth are rare.
func (c *Consumer) restackDomain(old []*laneEntry, d producer.Domain) {
	es := c.lanes.Load().byDomain[d]
	all := append(slices.Clone(old), es...)
	if len(all) == 0 {
		return
	}
	loadColumns(c.regroup(old, es, all[0].lane, d))
}

// regroup is restackDomain's change under the domain's lock (l0's): the
// lanes es of domain d that replace old, and the columns to fill after it.
func (c *Consumer) regroup(old, es []*laneEntry, l0 *Lane, d producer.Domain) ([]columnLoad, uint64) {
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
			l.col, l.stacked, l.loading = -1, false, false
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
	if ds.st != nil && !ds.off && keeps(ds, lanes) {
		if loads, ok := joinFree(ds, lanes); ok {
			return loads, ds.gen
		}
	}
	return restack(ds, lanes), ds.gen
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
// stack, if there are enough, and reports whether there were, with the
// columns to fill: those of the lanes that are ready and fit the stack.
func joinFree(ds *domainStack, lanes []*Lane) ([]columnLoad, bool) {
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
		return nil, false
	}
	var loads []columnLoad
	for _, l := range lanes {
		if l.col >= 0 {
			continue
		}
		l.col = slices.Index(ds.lanes, nil)
		ds.lanes[l.col] = l
		if ds.st.Fits(l.f) {
			l.loading = true
			loads = append(loads, columnLoad{l: l, f: l.f})
		}
	}
	return loads, true
}
