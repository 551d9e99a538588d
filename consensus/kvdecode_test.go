package consensus

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// kvDecodeSeeds are canonical KV-events payloads: good batches of every
// event kind, and batches wire.BatchEvents refuses.
func kvDecodeSeeds(t testing.TB) [][]byte {
	w, v := routing.Worker{ID: 3, Rank: 1}, routing.Worker{ID: 1 << 40}
	parent := storedEvent(w, 9, 5, 2)
	parent.Parent, parent.HasParent = 0, true
	cleared := routing.Event{Worker: v, ID: 4, Kind: routing.EventCleared, Tier: routing.TierHost}
	idZero := wire.EncodeBatch(w, 1, []routing.Event{storedEvent(w, 0, 1, 1)})
	badTier := wire.EncodeBatch(w, 1, []routing.Event{storedEvent(w, 1, 1, 1)})
	badTier.Events[0].Tier = 7
	gap := wire.EncodeBatch(w, 1, []routing.Event{storedEvent(w, 1, 1, 1), storedEvent(w, 3, 2, 1)})
	cmds := []*kvrpb.RaftKVEvents{
		{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 1, 3, 2), wire.EncodeBatch(v, 1, steadyBatch(v, 40, 16, 1))}},
		{Batches: []*kvrpb.KVEventBatch{wire.EncodeBatch(w, 0, []routing.Event{parent, cleared})}},
		{Batches: []*kvrpb.KVEventBatch{idZero, badTier, gap, {EngineId: 4}}},
	}
	var out [][]byte
	for _, c := range cmds {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// slowBatches is the protobuf path: Unmarshal, then wire.BatchEvents.
func slowBatches(data []byte) ([][]routing.Event, error) {
	var c kvrpb.RaftKVEvents
	if err := proto.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	out := make([][]routing.Event, len(c.Batches))
	for i, b := range c.Batches {
		_, out[i], _ = wire.BatchEvents(b)
	}
	return out, nil
}

// sameBatches reports whether two decodings agree on every batch: nil
// (refused) for both, or the same events.
func sameBatches(a, b [][]routing.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestDecodeKVEventsFastTakesCanonicalEntries(t *testing.T) {
	for i, data := range kvDecodeSeeds(t) {
		fast, ok := decodeKVEventsFast(data)
		if !ok {
			t.Fatalf("seed %d: the fast decoder refused a canonical entry", i)
		}
		slow, err := slowBatches(data)
		if err != nil || !sameBatches(fast, slow) {
			t.Fatalf("seed %d: fast %+v, slow %+v (%v)", i, fast, slow, err)
		}
	}
	// Non-canonical encodings are left to the protobuf path.
	tests := []struct {
		name string
		data []byte
	}{
		{"unknown field", []byte{0x10, 0x01}},
		{"truncated batch", []byte{0x0a, 0x05, 0x08}},
		{"fields out of order", []byte{0x0a, 0x04, 0x10, 0x01, 0x08, 0x01}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := decodeKVEventsFast(tc.data); ok {
				t.Fatal("accepted")
			}
		})
	}
}

// FuzzDecodeKVEventsFast checks that whatever the fast decoder accepts,
// the protobuf path decodes to the same batches and verdicts.
func FuzzDecodeKVEventsFast(f *testing.F) {
	for _, s := range kvDecodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := decodeKVEventsFast(data)
		if !ok {
			return
		}
		slow, err := slowBatches(data)
		if err != nil {
			t.Fatalf("fast path accepted what protobuf refuses: %v", err)
		}
		if !sameBatches(fast, slow) {
			t.Fatalf("fast %+v, slow %+v", fast, slow)
		}
	})
}
