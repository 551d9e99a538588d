package wire

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

func genEvent(t *rapid.T, w routing.Worker, id uint64) routing.Event {
	e := routing.Event{Worker: w, ID: id, Tier: routing.Tier(rapid.IntRange(0, 2).Draw(t, "tier"))}
	switch rapid.IntRange(0, 2).Draw(t, "kind") {
	case 0:
		e.Kind = routing.EventStored
		e.HasParent = rapid.Bool().Draw(t, "hasParent")
		if e.HasParent {
			e.Parent = routing.EngineHash(rapid.Uint64().Draw(t, "parent"))
		}
		for range rapid.IntRange(1, 5).Draw(t, "n") {
			e.Blocks = append(e.Blocks, routing.StoredBlock{Engine: routing.EngineHash(rapid.Uint64().Draw(t, "eh")), Local: routing.LocalHash(rapid.Uint64().Draw(t, "lh"))})
		}
	case 1:
		e.Kind = routing.EventRemoved
		for range rapid.IntRange(1, 5).Draw(t, "n") {
			e.Removed = append(e.Removed, routing.EngineHash(rapid.Uint64().Draw(t, "rm")))
		}
	default:
		e.Kind = routing.EventCleared
	}
	return e
}

func TestBatchRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := routing.Worker{ID: routing.WorkerID(rapid.Uint64Range(1, 1<<40).Draw(t, "id")), Rank: rapid.Uint32Range(0, 7).Draw(t, "rank")}
		first := rapid.Uint64Range(1, 1<<40).Draw(t, "first")
		var events []routing.Event
		for i := range rapid.IntRange(1, 6).Draw(t, "events") {
			events = append(events, genEvent(t, w, first+uint64(i)))
		}
		if err := CheckRun(events); err != nil {
			t.Fatalf("CheckRun refused a valid run: %v", err)
		}
		data, err := proto.Marshal(EncodeBatch(w, 9, events))
		if err != nil {
			t.Fatal(err)
		}
		gw, inc, got, err := DecodeBatch(data)
		if err != nil || gw != w || inc != 9 || !reflect.DeepEqual(got, events) {
			t.Fatalf("round trip: %v %v %d\n got %+v\nwant %+v", err, gw, inc, got, events)
		}
	})
}

func TestDecodeBatchRejects(t *testing.T) {
	w := routing.Worker{ID: 1}
	stored := routing.Event{Worker: w, ID: 1, Kind: routing.EventStored, Blocks: []routing.StoredBlock{{Engine: 1, Local: 2}}}
	gap := stored
	gap.ID = 3
	badTier := EncodeBatch(w, 1, []routing.Event{stored})
	badTier.Events[0].Tier = 7
	empty := EncodeBatch(w, 1, []routing.Event{stored})
	empty.Events[0].Data = nil
	noBlocks := EncodeBatch(w, 1, []routing.Event{stored})
	noBlocks.Events[0].GetStored().Blocks = nil
	tests := []struct {
		name string
		msg  *kvrpb.KVEventBatch
	}{
		{"no events", &kvrpb.KVEventBatch{EngineId: 1}},
		{"non-contiguous ids", EncodeBatch(w, 1, []routing.Event{stored, gap})},
		{"unknown tier", badTier},
		{"no data", empty},
		{"stored without blocks", noBlocks},
		{"event id 0", &kvrpb.KVEventBatch{Events: []*kvrpb.KVEvent{{Data: &kvrpb.KVEvent_Cleared{Cleared: &kvrpb.Cleared{}}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := proto.Marshal(tc.msg)
			if _, _, _, err := DecodeBatch(data); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
	if _, _, _, err := DecodeBatch([]byte{0xff, 0xff}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("garbage: err = %v", err)
	}
}

func TestCheckRunRejects(t *testing.T) {
	w := routing.Worker{ID: 1}
	stored := routing.Event{Worker: w, ID: 1, Kind: routing.EventStored, Blocks: []routing.StoredBlock{{Engine: 1, Local: 2}}}
	with := func(f func(e *routing.Event)) routing.Event {
		e := stored
		e.ID = 2
		f(&e)
		return e
	}
	tests := []struct {
		name   string
		events []routing.Event
	}{
		{"no events", nil},
		{"non-contiguous ids", []routing.Event{stored, with(func(e *routing.Event) { e.ID = 3 })}},
		{"event id 0", []routing.Event{with(func(e *routing.Event) { e.ID = 0 })}},
		{"two workers", []routing.Event{stored, with(func(e *routing.Event) { e.Worker.Rank = 1 })}},
		{"unknown tier", []routing.Event{stored, with(func(e *routing.Event) { e.Tier = 7 })}},
		{"stored without blocks", []routing.Event{stored, with(func(e *routing.Event) { e.Blocks = nil })}},
		{"too many removals", []routing.Event{with(func(e *routing.Event) {
			e.Kind, e.Removed = routing.EventRemoved, make([]routing.EngineHash, MaxBlocksPerEvent+1)
		})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckRun(tc.events); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func validCard() *kvrpb.WorkerCard {
	return &kvrpb.WorkerCard{EngineId: 7, DpSize: 2, Model: "m", BlockSize: 64, TotalKvBlocks: 100,
		MaxNumBatchedTokens: 8192, EndpointUrl: "http://127.0.0.1:9000", Checksum: "abc", Incarnation: 1, Version: 1}
}

func TestCard(t *testing.T) {
	data, _ := proto.Marshal(validCard())
	c, err := DecodeCard(data)
	if err != nil {
		t.Fatal(err)
	}
	infos := Infos(c)
	if len(infos) != 2 || infos[1].Worker != (routing.Worker{ID: 7, Rank: 1}) || infos[0].TotalBlocks != 100 {
		t.Fatalf("infos = %+v", infos)
	}
	if infos[0].Role != routing.RoleAggregated {
		t.Fatalf("a card without worker_type has role %v", infos[0].Role)
	}
	c.WorkerType, c.TransferDomain = "decode", "rack-2"
	if in := Infos(c)[1]; in.Role != routing.RoleDecode || in.TransferDomain != "rack-2" {
		t.Fatalf("decode card's info %+v", in)
	}
	tests := []struct {
		name   string
		mutate func(*kvrpb.WorkerCard)
	}{
		{"engine id", func(c *kvrpb.WorkerCard) { c.EngineId = 0 }},
		{"dp size", func(c *kvrpb.WorkerCard) { c.DpSize = 0 }},
		{"model", func(c *kvrpb.WorkerCard) { c.Model = "" }},
		{"block size", func(c *kvrpb.WorkerCard) { c.BlockSize = 0 }},
		{"capacity", func(c *kvrpb.WorkerCard) { c.TotalKvBlocks = 0 }},
		{"url", func(c *kvrpb.WorkerCard) { c.EndpointUrl = "ftp://x" }},
		{"checksum", func(c *kvrpb.WorkerCard) { c.Checksum = "" }},
		{"worker type", func(c *kvrpb.WorkerCard) { c.WorkerType = "prefil" }},
		{"bootstrap port", func(c *kvrpb.WorkerCard) { c.BootstrapPort = 70000 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validCard()
			tc.mutate(c)
			if err := ValidateCard(c); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	w := routing.Worker{ID: 3, Rank: 1}
	ev := routing.Event{Worker: w, Kind: routing.EventStored, Blocks: []routing.StoredBlock{{Engine: 5, Local: 6}}}
	msg := &kvrpb.SnapshotReply{EngineId: 3, Rank: 1, LastEventId: 42, Events: []*kvrpb.KVEvent{EncodeEvent(&ev)}}
	data, _ := proto.Marshal(msg)
	gw, last, events, err := DecodeSnapshot(data)
	if err != nil || gw != w || last != 42 || len(events) != 1 || events[0].Blocks[0].Engine != 5 {
		t.Fatalf("snapshot: %v %v %d %+v", err, gw, last, events)
	}
	data, _ = proto.Marshal(&kvrpb.SnapshotReply{EngineId: 3, Error: "unknown rank"})
	if _, _, _, err := DecodeSnapshot(data); err == nil {
		t.Fatal("refusal not reported")
	}
}

func FuzzDecodeBatch(f *testing.F) {
	w := routing.Worker{ID: 1}
	seed, _ := proto.Marshal(EncodeBatch(w, 1, []routing.Event{{Worker: w, ID: 1, Kind: routing.EventCleared}}))
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, events, err := DecodeBatch(data)
		if err != nil {
			return
		}
		for i := range events {
			if events[i].Validate() != nil || (i > 0 && events[i].ID != events[i-1].ID+1) {
				t.Fatalf("accepted invalid events %+v", events)
			}
		}
	})
}

func FuzzDecodeCard(f *testing.F) {
	seed, _ := proto.Marshal(validCard())
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := DecodeCard(data); err == nil && (c.EngineId == 0 || c.DpSize == 0 || len(Infos(c)) != int(c.DpSize)) {
			t.Fatalf("accepted invalid card %v", c)
		}
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, events, err := DecodeSnapshot(data)
		for i := range events {
			if err == nil && events[i].Validate() != nil {
				t.Fatalf("accepted invalid event %+v", events[i])
			}
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add([]byte{8, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := DecodeHeartbeat(data); err == nil && h.EngineId == 0 {
			t.Fatal("accepted engine id 0")
		}
	})
}
