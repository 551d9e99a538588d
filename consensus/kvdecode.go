package consensus

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// Field numbers of the KV-event messages (proto/kvr/v1/fleet.proto
// and raft.proto) the fast decoder reads.
const (
	fieldKVEventsBatches = 1
	fieldBatchEngine     = 1
	fieldBatchRank       = 2
	fieldBatchIncarn     = 3
	fieldBatchEvents     = 4
	fieldEventID         = 1
	fieldEventTier       = 2
	fieldEventStored     = 3
	fieldEventRemoved    = 4
	fieldEventCleared    = 5
	fieldStoredParent    = 1
	fieldStoredBlocks    = 2
	fieldBlockEngine     = 1
	fieldBlockLocal      = 2
	fieldRemovedHashes   = 1
)

// decodeKVEventsFast decodes a RaftKVEvents payload straight into routing
// events, one slice per batch (nil for a batch wire.BatchEvents would
// refuse), without building the protobuf messages: on every node, decoding
// cost more than applying (BenchmarkApplyKVEventsStages). It accepts only
// the canonical encoding the leader writes (deterministic marshal): known
// fields, in field order, each scalar at most once, repeated fields
// contiguous, packed removals. For such input its result is, by
// construction, what proto.Unmarshal then wire.BatchEvents give, and
// FuzzDecodeKVEventsFast checks it. Anything else returns ok false and
// the caller takes the protobuf path, which decides whether the entry is
// malformed. It never panics.
func decodeKVEventsFast(p []byte) (out [][]routing.Event, ok bool) {
	// An encoded stored block takes 20 bytes, so this is room for every
	// block of an entry that is mostly stored events.
	arena := make([]routing.StoredBlock, 0, len(p)/20)
	r := fieldReader{p: p}
	for len(r.p) > 0 {
		f, ok := r.next(fieldKVEventsBatches)
		if !ok || f.num != fieldKVEventsBatches || f.typ != protowire.BytesType {
			return nil, false
		}
		rb, ok := decodeBatchFast(f.b, &arena)
		if !ok {
			return nil, false
		}
		out = append(out, rb)
	}
	return out, true
}

// fieldReader walks one message's fields in order and refuses anything
// outside the canonical encoding: a field number below the previous one,
// or a scalar field seen twice.
type fieldReader struct {
	p    []byte
	last protowire.Number
}

// field is one field as fieldReader.next reads it: its number, wire type
// and value (v for a varint or a fixed64, b for bytes).
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	b   []byte
}

// next reads the next field; ok is false at a malformed field, a wire
// type the KV-event messages do not use, or an out-of-order field.
// repeated names the one field number allowed to repeat.
func (r *fieldReader) next(repeated protowire.Number) (f field, ok bool) {
	num, typ, n := protowire.ConsumeTag(r.p)
	if n < 0 || num < r.last || num == r.last && num != repeated {
		return f, false
	}
	f.num, f.typ = num, typ
	p := r.p[n:]
	switch typ {
	case protowire.VarintType:
		f.v, n = protowire.ConsumeVarint(p)
	case protowire.Fixed64Type:
		f.v, n = protowire.ConsumeFixed64(p)
	case protowire.BytesType:
		f.b, n = protowire.ConsumeBytes(p)
	default:
		return f, false
	}
	if n < 0 {
		return f, false
	}
	r.last, r.p = num, p[n:]
	return f, true
}

// decodeBatchFast decodes one KVEventBatch; its events are nil when
// wire.BatchEvents would refuse it. Blocks are carved from arena.
func decodeBatchFast(p []byte, arena *[]routing.StoredBlock) ([]routing.Event, bool) {
	r := fieldReader{p: p}
	var w routing.Worker
	bad := false
	// A 4-block stored event takes about 100 bytes; the estimate saves
	// most regrowth of the events slice.
	out := make([]routing.Event, 0, len(p)/64+1)
	for len(r.p) > 0 {
		f, ok := r.next(fieldBatchEvents)
		switch {
		case !ok:
		case f.num == fieldBatchEngine:
			w.ID, ok = routing.WorkerID(f.v), f.typ == protowire.VarintType
		case f.num == fieldBatchRank:
			w.Rank, ok = uint32(f.v), f.typ == protowire.VarintType
		case f.num == fieldBatchIncarn:
			ok = f.typ == protowire.VarintType
		case f.num == fieldBatchEvents && f.typ == protowire.BytesType:
			var e routing.Event
			var good bool
			e, good, ok = decodeEventFast(f.b, arena)
			bad = bad || !good
			out = append(out, e)
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	for i := range out {
		out[i].Worker = w
	}
	// What the routing events can show is judged by the batch rules'
	// one implementation; decodeEventFast judged the rest.
	if bad || wire.CheckRun(out) != nil {
		return nil, true
	}
	return out, true
}

// decodeEventFast decodes one KVEvent; ok reports whether the encoding is
// canonical, good whether the event has what a routing event cannot show
// and wire.DecodeEvent requires: one data member and a tier that is not
// negative (wire.CheckRun judges the rest).
func decodeEventFast(p []byte, arena *[]routing.StoredBlock) (e routing.Event, good, ok bool) {
	r := fieldReader{p: p}
	var tier int32
	for len(r.p) > 0 {
		f, ok := r.next(0)
		switch {
		case !ok || e.Kind != 0:
			// A field after the data member: a second member of the oneof
			// is not canonical.
			ok = false
		case f.num == fieldEventID:
			e.ID, ok = f.v, f.typ == protowire.VarintType
		case f.num == fieldEventTier:
			tier, ok = int32(f.v), f.typ == protowire.VarintType
		case f.typ != protowire.BytesType:
			ok = false
		case f.num == fieldEventStored:
			e.Kind, ok = routing.EventStored, decodeStoredFast(&e, f.b, arena)
		case f.num == fieldEventRemoved:
			e.Kind, ok = routing.EventRemoved, decodeRemovedFast(&e, f.b)
		case f.num == fieldEventCleared:
			e.Kind, ok = routing.EventCleared, len(f.b) == 0
		default:
			ok = false
		}
		if !ok {
			return e, false, false
		}
	}
	e.Tier = routing.Tier(tier)
	return e, e.Kind != 0 && tier >= 0, true
}

// decodeStoredFast decodes a Stored message.
func decodeStoredFast(e *routing.Event, p []byte, arena *[]routing.StoredBlock) bool {
	r := fieldReader{p: p}
	start := len(*arena)
	for len(r.p) > 0 {
		f, ok := r.next(fieldStoredBlocks)
		switch {
		case !ok:
		case f.num == fieldStoredParent && f.typ == protowire.Fixed64Type:
			e.Parent, e.HasParent = routing.EngineHash(f.v), true
		case f.num == fieldStoredBlocks && f.typ == protowire.BytesType:
			var b routing.StoredBlock
			b, ok = decodeBlockFast(f.b)
			*arena = append(*arena, b)
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	all := *arena
	e.Blocks = all[start:len(all):len(all)]
	return true
}

// decodeBlockFast decodes a StoredBlock message.
func decodeBlockFast(p []byte) (b routing.StoredBlock, ok bool) {
	r := fieldReader{p: p}
	for len(r.p) > 0 {
		f, ok := r.next(0)
		switch {
		case !ok || f.typ != protowire.Fixed64Type:
			return b, false
		case f.num == fieldBlockEngine:
			b.Engine = routing.EngineHash(f.v)
		case f.num == fieldBlockLocal:
			b.Local = routing.LocalHash(f.v)
		default:
			return b, false
		}
	}
	return b, true
}

// decodeRemovedFast decodes a Removed message with one packed field.
func decodeRemovedFast(e *routing.Event, p []byte) bool {
	r := fieldReader{p: p}
	for len(r.p) > 0 {
		f, ok := r.next(0)
		if !ok || f.num != fieldRemovedHashes || f.typ != protowire.BytesType || len(f.b)%8 != 0 {
			return false
		}
		e.Removed = make([]routing.EngineHash, len(f.b)/8)
		for i := range e.Removed {
			v, _ := protowire.ConsumeFixed64(f.b[8*i:])
			e.Removed[i] = routing.EngineHash(v)
		}
	}
	return true
}
