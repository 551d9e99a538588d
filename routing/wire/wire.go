package wire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Limits on decoded payloads. They bound the memory one message can make a
// router allocate; engines split larger change sets into several batches.
const (
	// MaxBlocksPerEvent bounds the blocks of one stored or removed event: a
	// 1M-token prompt at block size 16.
	MaxBlocksPerEvent = 1 << 16
	// MaxEventsPerBatch bounds the events of one batch.
	MaxEventsPerBatch = 1 << 14
	// MaxSnapshotEvents bounds a snapshot reply: a rank with 4M blocks
	// stored one sequence per event.
	MaxSnapshotEvents = 1 << 22
	// MaxDPSize bounds the data-parallel ranks of one engine.
	MaxDPSize = 1024
	// MaxModelNameBytes bounds a model name.
	MaxModelNameBytes = 256
)

// ErrMalformed is returned for a payload that does not decode to valid
// routing values.
var ErrMalformed = errors.New("wire: malformed payload")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// EncodeEvent converts one routing event to its wire form.
func EncodeEvent(e *routing.Event) *kvrpb.KVEvent {
	out := &kvrpb.KVEvent{EventId: e.ID, Tier: kvrpb.StorageTier(e.Tier)}
	switch e.Kind {
	case routing.EventStored:
		st := &kvrpb.Stored{Blocks: make([]*kvrpb.StoredBlock, len(e.Blocks))}
		if e.HasParent {
			p := uint64(e.Parent)
			st.ParentHash = &p
		}
		for i, b := range e.Blocks {
			st.Blocks[i] = &kvrpb.StoredBlock{EngineHash: uint64(b.Engine), LocalHash: uint64(b.Local)}
		}
		out.Data = &kvrpb.KVEvent_Stored{Stored: st}
	case routing.EventRemoved:
		rm := &kvrpb.Removed{EngineHashes: make([]uint64, len(e.Removed))}
		for i, h := range e.Removed {
			rm.EngineHashes[i] = uint64(h)
		}
		out.Data = &kvrpb.KVEvent_Removed{Removed: rm}
	case routing.EventCleared:
		out.Data = &kvrpb.KVEvent_Cleared{Cleared: &kvrpb.Cleared{}}
	}
	return out
}

// DecodeEvent converts one wire event of worker w to a routing event and
// validates it.
func DecodeEvent(w routing.Worker, in *kvrpb.KVEvent) (routing.Event, error) {
	return decodeEvent(w, in, true)
}

// decodeEvent decodes one event; snapshot events carry no meaningful id, so
// only stream events must have one.
func decodeEvent(w routing.Worker, in *kvrpb.KVEvent, needID bool) (routing.Event, error) {
	if in == nil {
		return routing.Event{}, malformed("nil event")
	}
	if needID && in.EventId == 0 {
		return routing.Event{}, malformed("event id 0")
	}
	e := routing.Event{Worker: w, ID: in.EventId, Tier: routing.Tier(in.Tier)}
	if in.Tier < 0 || !e.Tier.Valid() {
		return routing.Event{}, malformed("event %d: tier %d", in.EventId, in.Tier)
	}
	switch d := in.Data.(type) {
	case *kvrpb.KVEvent_Stored:
		if err := decodeStored(&e, d.Stored); err != nil {
			return routing.Event{}, err
		}
	case *kvrpb.KVEvent_Removed:
		if d.Removed == nil || len(d.Removed.EngineHashes) > MaxBlocksPerEvent {
			return routing.Event{}, malformed("event %d: removed blocks missing or over %d", in.EventId, MaxBlocksPerEvent)
		}
		e.Kind = routing.EventRemoved
		e.Removed = make([]routing.EngineHash, len(d.Removed.EngineHashes))
		for i, h := range d.Removed.EngineHashes {
			e.Removed[i] = routing.EngineHash(h)
		}
	case *kvrpb.KVEvent_Cleared:
		e.Kind = routing.EventCleared
	default:
		return routing.Event{}, malformed("event %d: no data", in.EventId)
	}
	if err := e.Validate(); err != nil {
		return routing.Event{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return e, nil
}

func decodeStored(e *routing.Event, st *kvrpb.Stored) error {
	if st == nil || len(st.Blocks) > MaxBlocksPerEvent {
		return malformed("event %d: stored blocks missing or over %d", e.ID, MaxBlocksPerEvent)
	}
	e.Kind = routing.EventStored
	if st.ParentHash != nil {
		e.Parent, e.HasParent = routing.EngineHash(*st.ParentHash), true
	}
	e.Blocks = make([]routing.StoredBlock, len(st.Blocks))
	for i, b := range st.Blocks {
		if b == nil {
			return malformed("event %d: nil block %d", e.ID, i)
		}
		e.Blocks[i] = routing.StoredBlock{Engine: routing.EngineHash(b.EngineHash), Local: routing.LocalHash(b.LocalHash)}
	}
	return nil
}

// EncodeBatch builds the wire batch of consecutive events of one rank.
func EncodeBatch(w routing.Worker, incarnation uint64, events []routing.Event) *kvrpb.KVEventBatch {
	b := &kvrpb.KVEventBatch{EngineId: uint64(w.ID), Rank: w.Rank, Incarnation: incarnation,
		Events: make([]*kvrpb.KVEvent, len(events))}
	for i := range events {
		b.Events[i] = EncodeEvent(&events[i])
	}
	return b
}

// DecodeBatch parses a KVEventBatch payload into routing events (see
// BatchEvents).
func DecodeBatch(data []byte) (routing.Worker, uint64, []routing.Event, error) {
	var b kvrpb.KVEventBatch
	if err := proto.Unmarshal(data, &b); err != nil {
		return routing.Worker{}, 0, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	w, events, err := BatchEvents(&b)
	return w, b.Incarnation, events, err
}

// BatchEvents converts one rank's batch to validated routing events:
// 1..MaxEventsPerBatch events whose ids increase by one. It is the one
// reading of a batch, for an engine's payload and for a raft entry's.
func BatchEvents(b *kvrpb.KVEventBatch) (routing.Worker, []routing.Event, error) {
	w := routing.Worker{ID: routing.WorkerID(b.GetEngineId()), Rank: b.GetRank()}
	out := make([]routing.Event, len(b.Events))
	for i, pe := range b.Events {
		e, err := DecodeEvent(w, pe)
		if err != nil {
			return w, nil, err
		}
		out[i] = e
	}
	if err := CheckRun(out); err != nil {
		return w, nil, err
	}
	return w, out, nil
}

// CheckRun checks a run of routing events as BatchEvents checks a batch,
// so that the batch EncodeBatch makes of a run it accepts decodes: every
// event of one worker, valid, within the block limits, with an id that is
// not 0 and one above the previous event's.
func CheckRun(events []routing.Event) error {
	if len(events) == 0 || len(events) > MaxEventsPerBatch {
		return malformed("batch of %d events, want 1..%d", len(events), MaxEventsPerBatch)
	}
	for i := range events {
		e := &events[i]
		switch {
		case e.Worker != events[0].Worker:
			return malformed("run mixes workers %v and %v", events[0].Worker, e.Worker)
		case e.ID == 0 || i > 0 && e.ID != events[i-1].ID+1:
			return malformed("event id %d after %d", e.ID, events[max(i-1, 0)].ID)
		case len(e.Blocks) > MaxBlocksPerEvent || len(e.Removed) > MaxBlocksPerEvent:
			return malformed("event %d: blocks over %d", e.ID, MaxBlocksPerEvent)
		}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
	}
	return nil
}
