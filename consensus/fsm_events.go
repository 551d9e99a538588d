package consensus

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
	"github.com/kvrouter/kvrouter/store"
)

// MaxBatchesPerEntry bounds the per-rank batches one KV-events entry
// coalesces.
const MaxBatchesPerEntry = 1024

var kvEventsSpec = spec{
	name: "kv_events",
	new:  func() proto.Message { return &kvrpb.RaftKVEvents{} },
	apply: func(f *FSM, _ uint64, m proto.Message) *kvrpb.RaftResult {
		return f.kvEvents(m.(*kvrpb.RaftKVEvents))
	},
	applyFast: func(f *FSM, _ uint64, payload []byte) (*kvrpb.RaftResult, bool) {
		batches, ok := decodeKVEventsFast(payload)
		if !ok {
			return nil, false
		}
		return f.applyRankBatches(batches), true
	},
	stamp:    func(proto.Message, int64) {},
	validate: func(m proto.Message) error { return validateKVEvents(m.(*kvrpb.RaftKVEvents)) },
}

// validateKVEvents checks every batch as the event plane's decoder does.
func validateKVEvents(c *kvrpb.RaftKVEvents) error {
	if len(c.Batches) == 0 || len(c.Batches) > MaxBatchesPerEntry {
		return fmt.Errorf("%d batches, want 1..%d", len(c.Batches), MaxBatchesPerEntry)
	}
	for _, b := range c.Batches {
		if _, err := decodeRankBatch(b); err != nil {
			return err
		}
	}
	return nil
}

// decodeRankBatch converts one rank's wire batch to routing events with
// contiguous ids.
func decodeRankBatch(b *kvrpb.KVEventBatch) ([]routing.Event, error) {
	w := routing.Worker{ID: routing.WorkerID(b.GetEngineId()), Rank: b.GetRank()}
	if len(b.GetEvents()) == 0 || len(b.GetEvents()) > wire.MaxEventsPerBatch {
		return nil, fmt.Errorf("worker %v: batch of %d events", w, len(b.GetEvents()))
	}
	out := make([]routing.Event, len(b.Events))
	for i, pe := range b.Events {
		e, err := wire.DecodeEvent(w, pe)
		if err != nil {
			return nil, err
		}
		if i > 0 && e.ID != out[i-1].ID+1 {
			return nil, fmt.Errorf("worker %v: event ids %d then %d", w, out[i-1].ID, e.ID)
		}
		out[i] = e
	}
	return out, nil
}

// kvEvents applies every batch to the ownership tables and to the index.
// A batch that does not decode is skipped whole (the leader validates
// before proposing, so this only happens across a decoder change); the
// count is the number of events applied.
func (f *FSM) kvEvents(c *kvrpb.RaftKVEvents) *kvrpb.RaftResult {
	batches := make([]rankBatch, len(c.Batches))
	for i, b := range c.Batches {
		events, err := decodeRankBatch(b)
		batches[i] = rankBatch{events: events, bad: err != nil}
	}
	return f.applyRankBatches(batches)
}

// applyRankBatches applies decoded batches, skipping the bad ones.
func (f *FSM) applyRankBatches(batches []rankBatch) *kvrpb.RaftResult {
	n := 0
	for _, b := range batches {
		if b.bad {
			continue
		}
		for i := range b.events {
			if f.applyEvent(&b.events[i]) {
				n++
			}
			// The index applies the same cursor rules; its errors
			// (stale, gap, unknown parent) mirror applyEvent's outcome.
			_ = f.idx.Apply(&b.events[i])
		}
	}
	return counted(n)
}

// applyEvent applies one event to the ownership tables with the exact
// index's rules (see routing/index): id cursor+1 applies, an id of 1 after
// a cursor above 1 is an engine restart, a duplicate or a gap changes
// nothing. It reports whether the event's id was consumed.
func (f *FSM) applyEvent(ev *routing.Event) bool {
	w := ev.Worker
	cur, _ := f.st.Cursor(w)
	switch {
	case ev.ID == cur+1:
	case ev.ID == 1 && cur > 1:
		f.st.ClearRank(w)
		f.watch.rankCleared(w) // Ownership change stream.
	default:
		return false
	}
	f.st.SetCursor(w, ev.ID)
	f.applyBody(ev)
	return true
}

// applyBody applies an event's blocks to the ownership tables, whatever
// its id.
func (f *FSM) applyBody(ev *routing.Event) {
	bit := uint8(1) << ev.Tier
	switch ev.Kind {
	case routing.EventStored:
		f.storeBlocks(ev, bit)
	case routing.EventRemoved:
		for _, eh := range ev.Removed {
			f.removeBlock(ev.Worker, eh, bit)
		}
	case routing.EventCleared:
		f.st.ClearRank(ev.Worker)
		f.watch.rankCleared(ev.Worker) // Ownership change stream.
	}
}

// storeBlocks places a stored event's blocks, chaining sequence hashes
// from the parent (or from the first block when there is none). An
// unknown parent places nothing.
func (f *FSM) storeBlocks(ev *routing.Event, bit uint8) {
	w := ev.Worker
	var prev routing.SeqHash
	if ev.HasParent {
		p, ok := f.st.Block(w, ev.Parent)
		if !ok {
			return
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

var registerWorkerSpec = spec{
	name: "register_worker",
	new:  func() proto.Message { return &kvrpb.RaftRegisterWorker{} },
	apply: func(f *FSM, _ uint64, m proto.Message) *kvrpb.RaftResult {
		return f.registerWorker(m.(*kvrpb.RaftRegisterWorker))
	},
	stamp:    func(m proto.Message, t int64) { m.(*kvrpb.RaftRegisterWorker).StampedUnixNanos = t },
	validate: func(m proto.Message) error { return validateRegister(m.(*kvrpb.RaftRegisterWorker)) },
}

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
func (f *FSM) registerWorker(c *kvrpb.RaftRegisterWorker) *kvrpb.RaftResult {
	if validateRegister(c) != nil {
		return result(CodeInvalid)
	}
	f.st.PutWorker(&kvrpb.RaftWorkerRecord{
		Card: proto.CloneOf(c.Card), Dc: c.Dc, Pool: c.Pool, RegisteredUnixNanos: c.StampedUnixNanos,
	})
	return counted(1)
}

var removeWorkerSpec = spec{
	name: "remove_worker",
	new:  func() proto.Message { return &kvrpb.RaftRemoveWorker{} },
	apply: func(f *FSM, _ uint64, m proto.Message) *kvrpb.RaftResult {
		return f.removeWorker(routing.WorkerID(m.(*kvrpb.RaftRemoveWorker).EngineId))
	},
	stamp:    func(proto.Message, int64) {},
	validate: func(proto.Message) error { return nil },
}

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
