package consensus

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/wire"
	"github.com/kvrouter/kvrouter/store"
)

// MaxBatchesPerEntry bounds the per-rank batches one KV-events entry
// coalesces.
const MaxBatchesPerEntry = 1024

var kvEventsSpec = typed[*kvrpb.RaftKVEvents]{
	name: "kv_events", apply: (*FSM).kvEvents, validate: validateKVEvents,
	applyFast: func(f *FSM, _ uint64, payload []byte) (*kvrpb.RaftResult, bool) {
		batches, ok := decodeKVEventsFast(payload)
		if !ok {
			return nil, false
		}
		return f.applyBatches(batches), true
	},
}.row()

// validateKVEvents checks every batch as the event plane's decoder does.
func validateKVEvents(c *kvrpb.RaftKVEvents) error {
	if len(c.Batches) == 0 || len(c.Batches) > MaxBatchesPerEntry {
		return fmt.Errorf("%d batches, want 1..%d", len(c.Batches), MaxBatchesPerEntry)
	}
	for _, b := range c.Batches {
		if _, _, err := wire.BatchEvents(b); err != nil {
			return err
		}
	}
	return nil
}

// kvEvents applies every batch to the ownership tables and to the index.
// A batch that does not decode is skipped whole (the leader validates
// before proposing, so this only happens across a decoder change).
func (f *FSM) kvEvents(_ uint64, c *kvrpb.RaftKVEvents) *kvrpb.RaftResult {
	batches := make([][]routing.Event, len(c.Batches))
	for i, b := range c.Batches {
		_, batches[i], _ = wire.BatchEvents(b) // nil when it does not decode
	}
	return f.applyBatches(batches)
}

// applyBatches applies decoded batches (nil ones change nothing) and
// counts the events applied.
func (f *FSM) applyBatches(batches [][]routing.Event) *kvrpb.RaftResult {
	n := 0
	for _, events := range batches {
		for i := range events {
			if f.applyEvent(&events[i]) {
				n++
			}
		}
	}
	return counted(n)
}

// applyEvent applies one event whose id the rank's cursor admits
// (index.CheckNext) to the ownership tables and then to the index, and
// reports whether it applied. A duplicate or a gap changes nothing.
func (f *FSM) applyEvent(ev *routing.Event) bool {
	w := ev.Worker
	cur, _ := f.st.Cursor(w)
	restart, err := index.CheckNext(ev, cur)
	if err != nil {
		return false
	}
	if restart {
		f.st.ClearRank(w)
		f.watch.rankCleared(w) // Ownership change stream.
	}
	f.st.SetCursor(w, ev.ID)
	placed := f.applyBody(ev)
	f.followIndex(ev, restart, placed)
	return true
}

// followIndex applies an event the tables took to the index. The index
// holds the same blocks, so its one expected error is the unknown parent
// that kept the tables from placing the event too (placed false). Any
// other outcome means it no longer matches the tables: the error is
// counted (kvrouter_raft_index_errors_total) and logged, and the rank's
// index entries are rebuilt from the tables, which are authoritative.
func (f *FSM) followIndex(ev *routing.Event, restart, placed bool) {
	err := f.idx.ApplyAdmitted(ev, restart)
	if placed && err == nil || !placed && errors.Is(err, index.ErrUnknownParent) {
		return
	}
	f.metrics.RaftIndexError()
	f.log.Warn("exact index diverged from the FSM's tables; rebuilding the rank",
		"worker", ev.Worker.String(), "event", ev.ID, "placed", placed, "err", err)
	cur, _ := f.st.Cursor(ev.Worker)
	f.rebuildRank(ev.Worker, cur)
}

// applyBody applies an event's blocks to the ownership tables, whatever
// its id. It reports false for a stored event whose parent is unknown,
// which places nothing.
func (f *FSM) applyBody(ev *routing.Event) bool {
	bit := uint8(1) << ev.Tier
	switch ev.Kind {
	case routing.EventStored:
		return f.storeBlocks(ev, bit)
	case routing.EventRemoved:
		for _, eh := range ev.Removed {
			f.removeBlock(ev.Worker, eh, bit)
		}
	case routing.EventCleared:
		f.st.ClearRank(ev.Worker)
		f.watch.rankCleared(ev.Worker) // Ownership change stream.
	}
	return true
}

// storeBlocks places a stored event's blocks, chaining sequence hashes
// from the parent (or from the first block when there is none). An
// unknown parent places nothing and returns false.
func (f *FSM) storeBlocks(ev *routing.Event, bit uint8) bool {
	w := ev.Worker
	var prev routing.SeqHash
	if ev.HasParent {
		p, ok := f.st.Block(w, ev.Parent)
		if !ok {
			return false
		}
		prev = p
	}
	for i, b := range ev.Blocks {
		seq := routing.SeqHash(b.Local)
		if i > 0 || ev.HasParent {
			seq = routing.Chain(prev, b.Local)
		}
		prev = seq
		if old, had := f.st.Block(w, b.Engine); had && old != seq {
			// A reused engine id: its old block is gone from every tier.
			if f.st.Tiers(w, old) != 0 {
				f.watch.removed(w, old) // Ownership change stream.
			}
			f.st.SetTiers(w, old, 0)
		}
		f.st.PutBlock(w, b.Engine, seq)
		t := f.st.Tiers(w, seq)
		if t == 0 {
			f.watch.stored(w, seq) // Ownership change stream: a new (rank, block) row.
		}
		f.st.SetTiers(w, seq, t|bit)
	}
	return true
}

// removeBlock drops the block named by eh from a tier, forgetting the
// engine id once no tier holds it.
func (f *FSM) removeBlock(w routing.Worker, eh routing.EngineHash, bit uint8) {
	seq, ok := f.st.Block(w, eh)
	if !ok {
		return
	}
	old := f.st.Tiers(w, seq)
	t := old &^ bit
	if t == 0 {
		f.st.DeleteBlock(w, eh)
		if old != 0 {
			f.watch.removed(w, seq) // Ownership change stream: the row is gone.
		}
	}
	f.st.SetTiers(w, seq, t)
}

var registerWorkerSpec = typed[*kvrpb.RaftRegisterWorker]{
	name: "register_worker", apply: (*FSM).registerWorker, validate: validateRegister,
	stamp: func(c *kvrpb.RaftRegisterWorker, t int64) { c.StampedUnixNanos = t },
}.row()

// MaxPoolBytes bounds a registration's pool name.
const MaxPoolBytes = 256

// validateRegister checks a registration, including the store's bound on
// the encoded record: a record the store refuses would stop a durable
// node's mirroring.
func validateRegister(c *kvrpb.RaftRegisterWorker) error {
	switch {
	case c.Card == nil:
		return errors.New("card must be set")
	case len(c.Dc) > store.MaxDCBytes || !utf8.ValidString(c.Dc):
		return errDC
	case len(c.Pool) > MaxPoolBytes || !utf8.ValidString(c.Pool):
		return fmt.Errorf("pool must be at most %d bytes of UTF-8", MaxPoolBytes)
	case proto.Size(c)+16 > store.MaxCardBytes:
		return fmt.Errorf("registration of %d bytes over %d", proto.Size(c), store.MaxCardBytes)
	}
	return wire.ValidateCard(c.Card)
}

// registerWorker records (or replaces) an engine's card.
func (f *FSM) registerWorker(_ uint64, c *kvrpb.RaftRegisterWorker) *kvrpb.RaftResult {
	if validateRegister(c) != nil {
		return result(CodeInvalid)
	}
	f.st.PutWorker(&kvrpb.RaftWorkerRecord{
		Card: proto.CloneOf(c.Card), Dc: c.Dc, Pool: c.Pool, RegisteredUnixNanos: c.StampedUnixNanos,
	})
	return counted(1)
}

var removeWorkerSpec = typed[*kvrpb.RaftRemoveWorker]{
	name: "remove_worker",
	apply: func(f *FSM, _ uint64, c *kvrpb.RaftRemoveWorker) *kvrpb.RaftResult {
		return f.removeWorker(routing.WorkerID(c.EngineId))
	},
}.row()

// removeWorker drops an engine's card and every rank's cursor and blocks,
// in the tables and in the index. Its bindings are left to
// InvalidateEngine, which the node proposes when it decides to.
func (f *FSM) removeWorker(id routing.WorkerID) *kvrpb.RaftResult {
	var ranks []routing.Worker
	f.st.Ranks(func(w routing.Worker, _ uint64) bool {
		if w.ID == id {
			ranks = append(ranks, w)
		}
		return true
	})
	for _, w := range ranks {
		f.st.DropRank(w)
	}
	if len(ranks) > 0 {
		f.watch.workerRemoved(id) // Ownership change stream.
	}
	f.idx.RemoveEngine(id)
	_, had := f.st.Worker(id)
	f.st.DeleteWorker(id)
	if had {
		return counted(1 + len(ranks))
	}
	return counted(len(ranks))
}
