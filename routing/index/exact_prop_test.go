package index

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
	"pgregory.net/rapid"
)

// refWorker is the naive model of one worker.
type refWorker struct {
	cursor  uint64
	engines map[routing.EngineHash]routing.SeqHash
	own     map[routing.SeqHash]uint8
}

// refIndex is the naive reference the exact index is compared with: plain
// maps per worker and a prefix walk per worker per query.
type refIndex struct {
	ws              map[routing.Worker]*refWorker
	unknownRemovals uint64
}

func (r *refIndex) worker(w routing.Worker) *refWorker {
	if rw := r.ws[w]; rw != nil {
		return rw
	}
	rw := &refWorker{engines: map[routing.EngineHash]routing.SeqHash{}, own: map[routing.SeqHash]uint8{}}
	r.ws[w] = rw
	return rw
}

func (r *refIndex) apply(ev *routing.Event) error {
	var cursor uint64
	if rw := r.ws[ev.Worker]; rw != nil {
		cursor = rw.cursor
	}
	switch {
	case ev.ID == cursor+1:
	case ev.ID == 1 && cursor > 1:
		clear(r.ws[ev.Worker].engines)
		clear(r.ws[ev.Worker].own)
	case ev.ID <= cursor:
		return ErrStale
	default:
		return ErrGap
	}
	rw := r.worker(ev.Worker)
	rw.cursor = ev.ID
	return r.body(rw, ev)
}

func (r *refIndex) body(rw *refWorker, ev *routing.Event) error {
	bit := uint8(1) << ev.Tier
	switch ev.Kind {
	case routing.EventStored:
		var prev routing.SeqHash
		if ev.HasParent {
			p, ok := rw.engines[ev.Parent]
			if !ok {
				return ErrUnknownParent
			}
			prev = p
		}
		for i, b := range ev.Blocks {
			seq := routing.SeqHash(b.Local)
			if i > 0 || ev.HasParent {
				seq = routing.Chain(prev, b.Local)
			}
			if old, ok := rw.engines[b.Engine]; ok && old != seq {
				delete(rw.own, old)
			}
			rw.engines[b.Engine] = seq
			rw.own[seq] |= bit
			prev = seq
		}
	case routing.EventRemoved:
		for _, e := range ev.Removed {
			seq, ok := rw.engines[e]
			if !ok {
				r.unknownRemovals++
				continue
			}
			if rw.own[seq]&bit == 0 {
				r.unknownRemovals++
			}
			if t := rw.own[seq] &^ bit; t != 0 {
				rw.own[seq] = t
			} else {
				delete(rw.own, seq)
				delete(rw.engines, e)
			}
		}
	case routing.EventCleared:
		clear(rw.engines)
		clear(rw.own)
	}
	return nil
}

func (r *refIndex) find(hashes []routing.SeqHash) []routing.Match {
	var out []routing.Match
	for _, w := range slices.SortedFunc(maps.Keys(r.ws), routing.Worker.Compare) {
		own := r.ws[w].own
		var o routing.Overlap
		i := 0
		for ; i < len(hashes) && own[hashes[i]]&deviceBit != 0; i++ {
			o.Device++
		}
		for ; i < len(hashes) && own[hashes[i]]&hostBit != 0; i++ {
			o.Host++
		}
		for ; i < len(hashes) && own[hashes[i]]&diskBit != 0; i++ {
			o.Disk++
		}
		if o.Total() > 0 {
			out = append(out, routing.Match{Worker: w, Overlap: o})
		}
	}
	return out
}

// exactMachine drives the exact index and the reference with the same
// random events over a few workers, tiers, engine ids and local hashes, so
// that prefixes are shared, engine ids are reused and parents go missing.
type exactMachine struct {
	x   *Exact
	ref refIndex
	// paths records the local-hash chain of every sequence hash stored so
	// far, so that queries can follow stored prefixes deep.
	paths map[routing.SeqHash][]uint64
}

var propWorkers = []routing.Worker{{ID: 1}, {ID: 2}, {ID: 2, Rank: 1}}

func (m *exactMachine) nextID(t *rapid.T, w routing.Worker) uint64 {
	var cur uint64
	if rw := m.ref.ws[w]; rw != nil {
		cur = rw.cursor
	}
	switch rapid.IntRange(0, 19).Draw(t, "idkind") {
	case 0:
		return rapid.Uint64Range(1, cur+1).Draw(t, "dup")
	case 1:
		return cur + 2
	case 2:
		return 1
	}
	return cur + 1
}

func (m *exactMachine) event(t *rapid.T, kind routing.EventKind) routing.Event {
	w := rapid.SampledFrom(propWorkers).Draw(t, "worker")
	ev := routing.Event{Worker: w, ID: m.nextID(t, w), Kind: kind, Tier: routing.Tier(rapid.IntRange(0, int(routing.NumTiers)-1).Draw(t, "tier"))}
	engine := rapid.Uint64Range(0, 12)
	switch kind {
	case routing.EventStored:
		if ev.HasParent = rapid.IntRange(0, 3).Draw(t, "hasParent") > 0; ev.HasParent {
			ev.Parent = routing.EngineHash(engine.Draw(t, "parent"))
			if rw := m.ref.ws[w]; rw != nil && len(rw.engines) > 0 && rapid.Bool().Draw(t, "knownParent") {
				known := slices.Sorted(maps.Keys(rw.engines))
				ev.Parent = rapid.SampledFrom(known).Draw(t, "parent")
			}
		}
		n := rapid.IntRange(1, 4).Draw(t, "blocks")
		for range n {
			ev.Blocks = append(ev.Blocks, blk(engine.Draw(t, "engine"), rapid.Uint64Range(0, 2).Draw(t, "local")))
		}
	case routing.EventRemoved:
		n := rapid.IntRange(1, 3).Draw(t, "removed")
		for range n {
			ev.Removed = append(ev.Removed, routing.EngineHash(engine.Draw(t, "engine")))
		}
	}
	return ev
}

func (m *exactMachine) apply(t *rapid.T, ev routing.Event) {
	m.record(ev)
	got, want := m.x.Apply(&ev), m.ref.apply(&ev)
	if !errors.Is(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("event %+v: err %v, reference %v", ev, got, want)
	}
}

func (m *exactMachine) Stored(t *rapid.T)  { m.apply(t, m.event(t, routing.EventStored)) }
func (m *exactMachine) Removed(t *rapid.T) { m.apply(t, m.event(t, routing.EventRemoved)) }
func (m *exactMachine) Cleared(t *rapid.T) { m.apply(t, m.event(t, routing.EventCleared)) }

func (m *exactMachine) Replace(t *rapid.T) {
	w := rapid.SampledFrom(propWorkers).Draw(t, "worker")
	n := rapid.IntRange(0, 3).Draw(t, "events")
	var evs []routing.Event
	rw := m.ref.worker(w)
	clear(rw.engines)
	clear(rw.own)
	skipped := 0
	for range n {
		ev := m.event(t, routing.EventStored)
		ev.Worker = w
		evs = append(evs, ev)
		m.record(ev)
		if m.ref.body(rw, &ev) != nil {
			skipped++
		}
	}
	cursor := rapid.Uint64Range(0, 20).Draw(t, "cursor")
	rw.cursor = cursor
	err := m.x.ReplaceWorker(w, evs, cursor)
	if (skipped > 0) != errors.Is(err, ErrUnknownParent) || (skipped == 0 && err != nil) {
		t.Fatalf("replace: err %v with %d orphans", err, skipped)
	}
}

func (m *exactMachine) Remove(t *rapid.T) {
	w := rapid.SampledFrom(propWorkers).Draw(t, "worker")
	_, known := m.ref.ws[w]
	if m.x.RemoveWorker(w) != known {
		t.Fatalf("RemoveWorker(%v) disagrees with the reference (known %v)", w, known)
	}
	delete(m.ref.ws, w)
}

// record remembers the local-hash paths of a stored event's blocks.
func (m *exactMachine) record(ev routing.Event) {
	if ev.Kind != routing.EventStored {
		return
	}
	var path []uint64
	if ev.HasParent {
		rw := m.ref.ws[ev.Worker]
		if rw == nil {
			return
		}
		seq, ok := rw.engines[ev.Parent]
		if !ok {
			return
		}
		path = m.paths[seq]
	}
	for _, b := range ev.Blocks {
		path = append(slices.Clip(path), uint64(b.Local))
		m.paths[seqs(path...)[len(path)-1]] = path
	}
}

func (m *exactMachine) Query(t *rapid.T) {
	var locals []uint64
	if len(m.paths) > 0 && rapid.IntRange(0, 3).Draw(t, "fromStored") > 0 {
		known := slices.SortedFunc(maps.Values(m.paths), slices.Compare)
		locals = slices.Clone(rapid.SampledFrom(known).Draw(t, "path"))
	}
	n := rapid.IntRange(0, 3).Draw(t, "extra")
	if len(locals) == 0 {
		n++
	}
	for range n {
		locals = append(locals, rapid.Uint64Range(0, 2).Draw(t, "q"))
	}
	q := seqs(locals...)
	if got, want := m.x.FindMatches(q, nil), m.ref.find(q); !slices.Equal(got, want) {
		t.Fatalf("query %v: got %v, want %v", locals, got, want)
	}
	if got, want := m.x.SharedRanges(q, nil), m.ref.shared(q); !slices.Equal(got, want) {
		t.Fatalf("query %v: shared runs %v, want %v", locals, got, want)
	}
}

// shared is the reference's shared runs: positions whose block any worker
// holds on the shared tier, grouped into runs.
func (r *refIndex) shared(hashes []routing.SeqHash) []Range {
	var out []Range
	for i, h := range hashes {
		held := false
		for _, rw := range r.ws {
			held = held || rw.own[h]&sharedBit != 0
		}
		switch {
		case !held:
		case len(out) > 0 && out[len(out)-1].End == int32(i):
			out[len(out)-1].End++
		default:
			out = append(out, Range{Start: int32(i), End: int32(i + 1)})
		}
	}
	return out
}

// Check compares the whole ownership state, the counts and the cursors.
func (m *exactMachine) Check(t *rapid.T) {
	pairs, sharedPairs, blocks := 0, 0, map[routing.SeqHash]bool{}
	for w, rw := range m.ref.ws {
		for seq, tiers := range rw.own {
			pairs++
			if tiers&sharedBit != 0 {
				sharedPairs++
			}
			blocks[seq] = true
			slot, ok := m.x.slots[w]
			if !ok {
				t.Fatalf("worker %v missing", w)
			}
			if got := m.x.tiersOf(slot, seq); got != tiers {
				t.Fatalf("worker %v block %#x tiers %b, want %b", w, seq, got, tiers)
			}
		}
		if c, _ := m.x.Cursor(w); c != rw.cursor {
			t.Fatalf("worker %v cursor %d, want %d", w, c, rw.cursor)
		}
		engines := map[routing.EngineHash]routing.SeqHash{}
		m.x.workers[m.x.slots[w]].engines.each(func(k uint64, v *routing.SeqHash) bool {
			engines[routing.EngineHash(k)] = *v
			return true
		})
		if !maps.Equal(engines, rw.engines) {
			t.Fatalf("worker %v engine map %v, want %v", w, engines, rw.engines)
		}
	}
	if got := m.x.Stats().UnknownRemovals; got != m.ref.unknownRemovals {
		t.Fatalf("unknown removals %d, want %d", got, m.ref.unknownRemovals)
	}
	s := m.x.Stats()
	if s.Pairs != pairs || s.Blocks != len(blocks) || s.Workers != len(m.ref.ws) || s.SharedPairs != sharedPairs {
		t.Fatalf("stats %+v, reference pairs %d (shared %d) blocks %d workers %d", s, pairs, sharedPairs, len(blocks), len(m.ref.ws))
	}
}

func TestExactMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &exactMachine{x: NewExact(), ref: refIndex{ws: map[routing.Worker]*refWorker{}}, paths: map[routing.SeqHash][]uint64{}}
		// Stores and queries dominate so that state builds up between the
		// rarer clears, removals and resyncs.
		t.Repeat(map[string]func(*rapid.T){
			"stored": m.Stored, "stored2": m.Stored, "stored3": m.Stored, "stored4": m.Stored,
			"removed": m.Removed, "query": m.Query, "query2": m.Query, "query3": m.Query,
			"cleared": func(t *rapid.T) {
				if rapid.IntRange(0, 3).Draw(t, "rare") == 0 {
					m.Cleared(t)
				}
			},
			"replace": m.Replace, "remove": func(t *rapid.T) {
				if rapid.IntRange(0, 3).Draw(t, "rare") == 0 {
					m.Remove(t)
				}
			},
			"": m.Check,
		})
	})
}
