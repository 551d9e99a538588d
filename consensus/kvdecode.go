package consensus

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// rankBatch is one rank's batch of a KV-events entry as the fast decoder
// returns it: its events, or bad when wire.BatchEvents would refuse it.
type rankBatch struct {
	events []routing.Event
	bad    bool
}

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
// events, without building the protobuf messages: on every node, decoding
// cost more than applying (BenchmarkApplyKVEventsStages). It accepts only
// the canonical encoding the leader writes (deterministic marshal): known
// fields, in field order, each scalar at most once, repeated fields
// contiguous, packed removals. For such input its result is, by
// construction, what proto.Unmarshal then wire.BatchEvents give, and
// FuzzDecodeKVEventsFast checks it. Anything else returns ok false and
// the caller takes the protobuf path, which decides whether the entry is
// malformed. It never panics.
func decodeKVEventsFast(p []byte) (out []rankBatch, ok bool) {
	// An encoded stored block takes 20 bytes, so this is room for every
	// block of an entry that is mostly stored events.
	arena := make([]routing.StoredBlock, 0, len(p)/20)
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 || num != fieldKVEventsBatches || typ != protowire.BytesType {
			return nil, false
		}
		body, m := protowire.ConsumeBytes(p[n:])
		if m < 0 {
			return nil, false
		}
		p = p[n+m:]
		rb, ok := decodeBatchFast(body, &arena)
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

// next returns the next field's number, type and the bytes after its tag;
// ok false at a malformed tag or out-of-order field. repeated names the
// one field number allowed to repeat.
func (r *fieldReader) next(repeated protowire.Number) (protowire.Number, protowire.Type, bool) {
	num, typ, n := protowire.ConsumeTag(r.p)
	if n < 0 || num < r.last || num == r.last && num != repeated {
		return 0, 0, false
	}
	r.last, r.p = num, r.p[n:]
	return num, typ, true
}

// varint consumes a varint value.
func (r *fieldReader) varint(typ protowire.Type) (uint64, bool) {
	if typ != protowire.VarintType {
		return 0, false
	}
	v, n := protowire.ConsumeVarint(r.p)
	if n < 0 {
		return 0, false
	}
	r.p = r.p[n:]
	return v, true
}

// fixed64 consumes a fixed64 value.
func (r *fieldReader) fixed64(typ protowire.Type) (uint64, bool) {
	if typ != protowire.Fixed64Type {
		return 0, false
	}
	v, n := protowire.ConsumeFixed64(r.p)
	if n < 0 {
		return 0, false
	}
	r.p = r.p[n:]
	return v, true
}

// bytes consumes a length-delimited value.
func (r *fieldReader) bytes(typ protowire.Type) ([]byte, bool) {
	if typ != protowire.BytesType {
		return nil, false
	}
	v, n := protowire.ConsumeBytes(r.p)
	if n < 0 {
		return nil, false
	}
	r.p = r.p[n:]
	return v, true
}

// decodeBatchFast decodes one KVEventBatch and judges it as
// wire.BatchEvents does. Blocks are carved from arena.
func decodeBatchFast(p []byte, arena *[]routing.StoredBlock) (rankBatch, bool) {
	r := fieldReader{p: p}
	var w routing.Worker
	// A 4-block stored event takes about 100 bytes; the estimate saves
	// most regrowth of the events slice.
	out := rankBatch{events: make([]routing.Event, 0, len(p)/64+1)}
	for len(r.p) > 0 {
		num, typ, ok := r.next(fieldBatchEvents)
		if !ok {
			return rankBatch{}, false
		}
		var v uint64
		switch num {
		case fieldBatchEngine:
			v, ok = r.varint(typ)
			w.ID = routing.WorkerID(v)
		case fieldBatchRank:
			v, ok = r.varint(typ)
			w.Rank = uint32(v)
		case fieldBatchIncarn:
			_, ok = r.varint(typ)
		case fieldBatchEvents:
			var body []byte
			if body, ok = r.bytes(typ); ok {
				var e routing.Event
				var good bool
				e, good, ok = decodeEventFast(body, arena)
				out.bad = out.bad || !good
				out.events = append(out.events, e)
			}
		default:
			ok = false
		}
		if !ok {
			return rankBatch{}, false
		}
	}
	for i := range out.events {
		out.events[i].Worker = w
	}
	// What the routing events can show is judged by the batch rules'
	// one implementation; decodeEventFast judged the rest.
	out.bad = out.bad || wire.CheckRun(out.events) != nil
	return out, true
}

// decodeEventFast decodes one KVEvent; ok reports whether the encoding is
// canonical, good whether the event has what a routing event cannot show
// and wire.DecodeEvent requires: one data member and a tier that is not
// negative (wire.CheckRun judges the rest).
func decodeEventFast(p []byte, arena *[]routing.StoredBlock) (e routing.Event, good, ok bool) {
	r := fieldReader{p: p}
	var tier int32
	kind := -1
	for len(r.p) > 0 {
		num, typ, ok := r.next(0)
		if !ok || kind >= 0 {
			// A second member of the oneof is not canonical.
			return e, false, false
		}
		var v uint64
		var body []byte
		switch num {
		case fieldEventID:
			v, ok = r.varint(typ)
			e.ID = v
		case fieldEventTier:
			v, ok = r.varint(typ)
			tier = int32(v)
		case fieldEventStored, fieldEventRemoved, fieldEventCleared:
			if body, ok = r.bytes(typ); ok {
				kind = int(num)
				ok = decodeDataFast(&e, num, body, arena)
			}
		default:
			ok = false
		}
		if !ok {
			return e, false, false
		}
	}
	e.Tier = routing.Tier(tier)
	return e, kind >= 0 && tier >= 0, true
}

// decodeDataFast decodes the oneof member num of an event into e.
func decodeDataFast(e *routing.Event, num protowire.Number, p []byte, arena *[]routing.StoredBlock) bool {
	switch num {
	case fieldEventStored:
		e.Kind = routing.EventStored
		return decodeStoredFast(e, p, arena)
	case fieldEventRemoved:
		e.Kind = routing.EventRemoved
		return decodeRemovedFast(e, p)
	}
	e.Kind = routing.EventCleared
	return len(p) == 0
}

// decodeStoredFast decodes a Stored message.
func decodeStoredFast(e *routing.Event, p []byte, arena *[]routing.StoredBlock) bool {
	r := fieldReader{p: p}
	start := len(*arena)
	for len(r.p) > 0 {
		num, typ, ok := r.next(fieldStoredBlocks)
		if !ok {
			return false
		}
		switch num {
		case fieldStoredParent:
			var v uint64
			v, ok = r.fixed64(typ)
			e.Parent, e.HasParent = routing.EngineHash(v), true
		case fieldStoredBlocks:
			var body []byte
			if body, ok = r.bytes(typ); ok {
				var b routing.StoredBlock
				b, ok = decodeBlockFast(body)
				*arena = append(*arena, b)
			}
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
func decodeBlockFast(p []byte) (routing.StoredBlock, bool) {
	r := fieldReader{p: p}
	var b routing.StoredBlock
	for len(r.p) > 0 {
		num, typ, ok := r.next(0)
		if !ok {
			return b, false
		}
		var v uint64
		switch num {
		case fieldBlockEngine:
			v, ok = r.fixed64(typ)
			b.Engine = routing.EngineHash(v)
		case fieldBlockLocal:
			v, ok = r.fixed64(typ)
			b.Local = routing.LocalHash(v)
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
	return b, true
}

// decodeRemovedFast decodes a Removed message with one packed field.
func decodeRemovedFast(e *routing.Event, p []byte) bool {
	r := fieldReader{p: p}
	for len(r.p) > 0 {
		num, typ, ok := r.next(0)
		if !ok || num != fieldRemovedHashes {
			return false
		}
		body, ok := r.bytes(typ)
		if !ok || len(body)%8 != 0 {
			return false
		}
		e.Removed = make([]routing.EngineHash, len(body)/8)
		for i := range e.Removed {
			v, _ := protowire.ConsumeFixed64(body[8*i:])
			e.Removed[i] = routing.EngineHash(v)
		}
	}
	return true
}
