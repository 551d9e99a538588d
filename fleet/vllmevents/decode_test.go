package vllmevents

import (
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvrouter/kvrouter/routing"
)

func mustPack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeHashes(t *testing.T) {
	digest := make([]byte, 32)
	digest[31] = 1
	tests := []struct {
		name string
		hash any
		want routing.EngineHash
	}{
		{"small int", 7, 7},
		{"negative python hash", int64(-2), routing.EngineHash(^uint64(1))},
		{"unsigned above MaxInt64", uint64(1<<63 + 5), 1<<63 + 5},
		{"int8", int8(-100), routing.EngineHash(^uint64(99))},
		{"bytes digest", digest, BytesHash(digest)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := DecodeBatch(mustPack(t, []any{1.5, []any{[]any{"BlockRemoved", []any{tc.hash}}}}))
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Events[0].Hashes[0]; got != tc.want {
				t.Fatalf("hash %#x, want %#x", uint64(got), uint64(tc.want))
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	nested := []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x92, 0xa7}
	nested = append(nested, "Unknown"...)
	for range 100 {
		nested = append(nested, 0x91)
	}
	tests := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"not an array", mustPack(t, "hello")},
		{"one field", mustPack(t, []any{1.0})},
		{"truncated", mustPack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{1, 2}, 2, nil}}})[:12]},
		{"trailing bytes", append(mustPack(t, []any{1.0, []any{}}), 0xc0)},
		{"forged length", []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff}},
		{"tag not a string", mustPack(t, []any{1.0, []any{[]any{5, []any{1}}}})},
		{"untagged event", mustPack(t, []any{1.0, []any{[]any{}}})},
		{"hashes not a list", mustPack(t, []any{1.0, []any{[]any{"BlockRemoved", "x"}}})},
		{"nil token", mustPack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{nil, 2}, 2, nil}}})},
		{"negative token", mustPack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{-1, 2}, 2, nil}}})},
		{"token above u32", mustPack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{1 << 33, 2}, 2, nil}}})},
		{"stored without hashes", mustPack(t, []any{1.0, []any{map[string]any{"type": "BlockStored"}}})},
		{"map batch without events", mustPack(t, map[string]any{"ts": 1.0})},
		{"timestamp a string", mustPack(t, []any{"now", []any{}})},
		{"deep nesting", nested},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeBatch(tc.payload); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
		})
	}
}

func TestDecodeLayouts(t *testing.T) {
	tests := []struct {
		name    string
		payload any
		check   func(t *testing.T, b Batch)
	}{
		{"unknown tag is a reject, not a failure",
			[]any{1.0, []any{[]any{"BlockPinned", []any{1}, map[string]any{"x": []any{1}}}, []any{"AllBlocksCleared"}}},
			func(t *testing.T, b Batch) {
				if len(b.Rejects) != 1 || b.Rejects[0].Reason != ReasonUnknownEvent || len(b.Events) != 1 {
					t.Fatalf("%+v", b)
				}
			}},
		{"num_toks_per_block that differ",
			[]any{1.0, []any{[]any{"BlockStored", []any{1, 2}, nil, []any{1, 2, 3}, []any{2, 1}, nil}}},
			func(t *testing.T, b Batch) {
				if b.Events[0].BlockSize != -1 {
					t.Fatalf("block size %d", b.Events[0].BlockSize)
				}
			}},
		{"rank and unknown batch fields",
			[]any{1.0, []any{}, 3, "later"},
			func(t *testing.T, b Batch) {
				if !b.HasRank || b.Rank != 3 {
					t.Fatalf("%+v", b)
				}
			}},
		{"map event with unknown keys and num_toks_per_block",
			[]any{1.0, []any{map[string]any{"type": "BlockStored", "block_hashes": []any{1}, "token_ids": []any{1, 2},
				"num_toks_per_block": []any{2}, "locality": "remote", "medium": 7}}},
			func(t *testing.T, b Batch) {
				ev := b.Events[0]
				if ev.Kind != routing.EventStored || ev.BlockSize != 2 || ev.Medium != "" || len(ev.Tokens) != 2 {
					t.Fatalf("%+v", ev)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := DecodeBatch(mustPack(t, tc.payload))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, b)
		})
	}
}

// FuzzDecode feeds arbitrary payloads through the decoder and converter:
// neither may panic, and a decoded batch converts into valid events.
func FuzzDecode(f *testing.F) {
	for _, fx := range fuzzSeeds(f) {
		f.Add(fx)
	}
	conv, _ := NewConverter(routing.Worker{ID: 1}, 4)
	dec := NewDecoder()
	f.Fuzz(func(t *testing.T, payload []byte) {
		var b Batch
		if err := dec.Decode(payload, &b); err != nil {
			return
		}
		events, _, _ := conv.Convert(nil, &b)
		for i := range events {
			if err := events[i].Validate(); err != nil {
				t.Fatalf("converted event invalid: %v", err)
			}
		}
	})
}
