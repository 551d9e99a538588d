package fleet

import (
	"errors"
	"log/slog"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// Index is what the plane needs of the exact prefix index. *index.Exact
// satisfies it; its concurrency contract (safe for concurrent use, atomic
// ReplaceWorker) is assumed.
type Index interface {
	Apply(ev *routing.Event) error
	ReplaceWorker(w routing.Worker, events []routing.Event, cursor uint64) error
	RemoveEngine(id routing.WorkerID) int
	Cursor(w routing.Worker) (uint64, bool)
}

var _ Index = (*index.Exact)(nil)

// Gate is implemented by an Index that accepts writes only at times: a
// raft-backed index accepts them on the leader, which alone ingests the
// DC's KV events. While Accepting reports false the plane ignores KV
// events (status "standby"), forgets its per-rank stream state and starts
// no resyncs; when it turns true, the next batch or heartbeat of each rank
// is compared against the index's cursor, so a rank whose events the
// index cannot account for is resynced.
type Gate interface {
	Accepting() bool
}

// RunIndex is implemented by an Index that takes a rank's events in runs:
// a raft-backed index proposes a run as one batch instead of one per
// event. ApplyRun takes events (one rank's, in order) up to the first one
// it cannot apply and returns how many it took and, when it stopped early,
// the error Apply would have returned for the event that stopped it.
type RunIndex interface {
	ApplyRun(events []routing.Event) (int, error)
}

// stream is the applier's state of one rank's event stream. The cursor
// itself lives in the index.
type stream struct {
	// resyncing is set while a snapshot of the rank is in flight; live
	// events then go to buf.
	resyncing bool
	// gen names the resync in flight, so that a late answer to an earlier
	// one (before a restart or removal) is recognised and discarded.
	gen uint64
	buf []routing.Event
	// hbLast is the last event id the previous heartbeat reported.
	hbLast uint64
}

// ingester applies KV events to the index. It is confined to the applier
// goroutine (or to a test's goroutine): no locks.
type ingester struct {
	idx    Index
	reg    *Registry
	ctr    *counters
	log    *slog.Logger
	maxBuf int
	// fetch starts the snapshot request of one rank; its answer comes back
	// through applySnapshot with the same gen.
	fetch   func(w routing.Worker, gen uint64)
	streams map[routing.Worker]*stream
	gen     uint64
	// gate is idx as a Gate, or nil when idx always accepts.
	gate Gate
	// run is idx as a RunIndex, or nil.
	run RunIndex
}

func newIngester(idx Index, reg *Registry, ctr *counters, log *slog.Logger, maxBuf int, fetch func(routing.Worker, uint64)) *ingester {
	g := &ingester{idx: idx, reg: reg, ctr: ctr, log: log, maxBuf: maxBuf, fetch: fetch,
		streams: make(map[routing.Worker]*stream)}
	g.gate, _ = idx.(Gate)
	g.run, _ = idx.(RunIndex)
	return g
}

// accepting reports whether the index takes writes now. On false it drops
// every stream's state, so that nothing learnt while standing by (a
// resync in flight, a heartbeat id) is trusted when writes resume.
func (g *ingester) accepting() bool {
	if g.gate == nil || g.gate.Accepting() {
		return true
	}
	if len(g.streams) > 0 {
		clear(g.streams)
	}
	return false
}

// handleDecoded applies a decoded batch. Batches of engines that are not
// registered with this incarnation are dropped: the snapshot taken when
// the card arrives covers them.
func (g *ingester) handleDecoded(w routing.Worker, inc uint64, events []routing.Event, err error) {
	if err != nil {
		g.ctr.malformed("batch")
		g.log.Debug("malformed kv event batch", "worker", w.String(), "err", err)
		return
	}
	ranks, ok := g.reg.live(w.ID, inc)
	if !ok || w.Rank >= ranks {
		g.ctr.events(events, statusUnregistered)
		return
	}
	if !g.accepting() {
		g.ctr.events(events, statusStandby)
		return
	}
	s := g.stream(w)
	if s.resyncing {
		g.buffer(w, s, events)
		return
	}
	g.applyLive(w, s, events)
}

func (g *ingester) stream(w routing.Worker) *stream {
	s, ok := g.streams[w]
	if !ok {
		s = &stream{}
		g.streams[w] = s
	}
	return s
}

// applyLive applies events in order. At a gap it starts the rank's resync
// and buffers the events from the gap on.
func (g *ingester) applyLive(w routing.Worker, s *stream, events []routing.Event) {
	for i := 0; i < len(events); {
		var err error
		if g.run != nil {
			var n int
			n, err = g.run.ApplyRun(events[i:])
			if n == 0 && err == nil {
				err = errors.New("fleet: the index took no event of a run")
			}
			g.ctr.events(events[i:i+n], statusOK)
			if i += n; err == nil {
				continue // the whole run was taken: i == len(events)
			}
		} else {
			err = g.idx.Apply(&events[i])
		}
		if errors.Is(err, index.ErrGap) {
			g.ctr.gap()
			cur, _ := g.idx.Cursor(w)
			g.log.Info("kv event gap, resyncing", "worker", w.String(), "event", events[i].ID, "cursor", cur)
			g.startResync(w, s)
			g.buffer(w, s, events[i:])
			return
		}
		g.ctr.applied(&events[i], err)
		i++
	}
}

// buffer keeps live events of a resyncing rank. Past maxBuf the buffer is
// dropped: the hole it leaves is a gap that the next batch (or heartbeat)
// after the resync detects.
func (g *ingester) buffer(w routing.Worker, s *stream, events []routing.Event) {
	if len(s.buf)+len(events) > g.maxBuf {
		g.ctr.events(s.buf, statusDropped)
		g.ctr.events(events, statusDropped)
		g.log.Warn("resync buffer overflow, events dropped", "worker", w.String(), "events", len(s.buf)+len(events))
		s.buf = nil
		return
	}
	s.buf = append(s.buf, events...)
}

// startResync requests a snapshot of the rank unless one is in flight.
func (g *ingester) startResync(w routing.Worker, s *stream) {
	if s.resyncing || !g.accepting() {
		return
	}
	g.gen++
	s.resyncing, s.gen = true, g.gen
	g.fetch(w, s.gen)
}

// snapshotResult is the outcome of one rank's snapshot request.
type snapshotResult struct {
	w      routing.Worker
	gen    uint64
	last   uint64
	events []routing.Event
	err    error
}

// applySnapshot replaces the rank's state with the snapshot and drains the
// events buffered meanwhile, skipping those the snapshot already covers.
// A failed resync drops the buffer; the next gap retries.
func (g *ingester) applySnapshot(r snapshotResult) {
	s, ok := g.streams[r.w]
	if !ok || !s.resyncing || s.gen != r.gen {
		g.ctr.resync(outcomeDiscarded)
		return
	}
	buf := s.buf
	s.resyncing, s.buf = false, nil
	err := r.err
	if err == nil {
		err = g.idx.ReplaceWorker(r.w, r.events, r.last)
		if errors.Is(err, index.ErrUnknownParent) {
			g.log.Warn("snapshot partly applied", "worker", r.w.String(), "err", err)
			err = nil
		}
	}
	if err != nil {
		g.ctr.resync(outcomeError)
		g.ctr.events(buf, statusDropped)
		g.log.Warn("resync failed", "worker", r.w.String(), "err", err)
		return
	}
	g.ctr.resync(outcomeOK)
	g.drain(r.w, s, buf, r.last)
}

func (g *ingester) drain(w routing.Worker, s *stream, buf []routing.Event, last uint64) {
	i := 0
	for i < len(buf) && buf[i].ID <= last {
		i++
	}
	g.ctr.events(buf[:i], statusStale)
	g.applyLive(w, s, buf[i:])
}

// reset forgets everything about the engine and resyncs each of its ranks:
// the engine is new to this node or restarted.
func (g *ingester) reset(id routing.WorkerID, ranks uint32) {
	g.remove(id)
	for r := range ranks {
		w := routing.Worker{ID: id, Rank: r}
		g.startResync(w, g.stream(w))
	}
}

// remove drops the engine's blocks and streams; answers to its resyncs in
// flight are then discarded.
func (g *ingester) remove(id routing.WorkerID) {
	g.idx.RemoveEngine(id)
	for w := range g.streams {
		if w.ID == id {
			delete(g.streams, w)
		}
	}
}

// tail checks a heartbeat's last event id against the cursor. Events
// published before the previous heartbeat have had a whole heartbeat
// period to arrive, so a cursor below that heartbeat's id means the tail
// of the stream was lost (a gap no later batch has revealed yet).
func (g *ingester) tail(w routing.Worker, last uint64) {
	s, ok := g.streams[w]
	if !ok {
		// A gated index learns ranks from heartbeats too: a new leader
		// must find a lost tail even of a rank that publishes nothing.
		// (Tails come only from accepted heartbeats of live ranks.)
		if g.gate == nil || !g.accepting() {
			return
		}
		s = g.stream(w)
	}
	prev := s.hbLast
	s.hbLast = last
	if s.resyncing || prev > last {
		return
	}
	if cur, _ := g.idx.Cursor(w); cur < prev {
		g.ctr.gap()
		g.log.Info("kv event tail lost, resyncing", "worker", w.String(), "cursor", cur, "last", prev)
		g.startResync(w, s)
	}
}
