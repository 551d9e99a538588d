package routing

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func testKey(t *testing.T, fill byte, id string) *TrackingKey {
	t.Helper()
	k, err := NewTrackingKey(bytes.Repeat([]byte{fill}, TrackingKeyBytes), id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNewTrackingKeyRefusesBadKeys(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
		id   string
	}{
		{"short", make([]byte, 31), "k1"},
		{"oversized", make([]byte, 33), "k1"},
		{"empty", nil, "k1"},
		{"no id", make([]byte, 32), ""},
		{"long id", make([]byte, 32), string(make([]byte, MaxTrackingKeyIDBytes+1))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewTrackingKey(tc.key, tc.id); !errors.Is(err, ErrTrackingKey) {
				t.Fatalf("err = %v, want ErrTrackingKey", err)
			}
		})
	}
}

func tokens(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i*7 + 3)
	}
	return out
}

func TestKeyedHashesDifferFromPublicAndPerScope(t *testing.T) {
	k := testKey(t, 1, "epoch-1")
	toks := tokens(64)
	base := TrackingScope{Model: "m", BlockSize: 16}
	keyed, err := k.SeqHashes(nil, toks, base)
	if err != nil {
		t.Fatal(err)
	}
	public, _ := BlockHashes(nil, toks, 16, HashSeed)
	if len(keyed) != 4 || len(public) != 4 {
		t.Fatalf("lengths %d %d", len(keyed), len(public))
	}
	for i := range keyed {
		if keyed[i] == public[i] {
			t.Fatalf("block %d: keyed hash equals the public one", i)
		}
	}
	again, _ := k.SeqHashes(nil, toks, base)
	if !slices.Equal(keyed, again) {
		t.Fatal("keyed hashes are not deterministic")
	}
	scopes := []struct {
		name string
		s    TrackingScope
	}{
		{"model", TrackingScope{Model: "other", BlockSize: 16}},
		{"group", TrackingScope{Model: "m", RoutingGroup: "g", BlockSize: 16}},
		{"salt", TrackingScope{Model: "m", BlockSize: 16, CacheSalt: "tenant"}},
		{"lora", TrackingScope{Model: "m", BlockSize: 16, LoRA: "adapter"}},
		{"eagle", TrackingScope{Model: "m", BlockSize: 16, Eagle: true}},
		// Field boundaries are length-prefixed: moving bytes from the
		// model to the group is another scope.
		{"boundary", TrackingScope{Model: "", RoutingGroup: "m", BlockSize: 16}},
	}
	for _, tc := range scopes {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := k.SeqHashes(nil, toks, tc.s)
			if h[0] == keyed[0] {
				t.Fatal("another scope shares the first identity")
			}
		})
	}
}

// TestKeyRotation checks that a new key or a new key id (a rotation)
// changes every identity, that the public hashes the index uses do not
// change, and that the same key and id give back the same identities (a
// restart).
func TestKeyRotation(t *testing.T) {
	toks := tokens(48)
	s := TrackingScope{Model: "m", BlockSize: 16}
	old, _ := testKey(t, 1, "epoch-1").SeqHashes(nil, toks, s)
	tests := []struct {
		name string
		key  *TrackingKey
		same bool
	}{
		{"restart, same key and id", testKey(t, 1, "epoch-1"), true},
		{"new key, same id", testKey(t, 2, "epoch-1"), false},
		{"same key, new id", testKey(t, 1, "epoch-2"), false},
		{"new key and id", testKey(t, 2, "epoch-2"), false},
	}
	public, _ := BlockHashes(nil, toks, 16, HashSeed)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := tc.key.SeqHashes(nil, toks, s)
			if slices.Equal(h, old) != tc.same {
				t.Fatalf("equal to the old identities = %v, want %v", !tc.same, tc.same)
			}
			for i := range h {
				if !tc.same && h[i] == old[i] {
					t.Fatalf("block %d kept its identity across a rotation", i)
				}
			}
			again, _ := BlockHashes(nil, toks, 16, HashSeed)
			if !slices.Equal(public, again) {
				t.Fatal("public hashes changed")
			}
		})
	}
}

func TestKeyedHashesPrefixProperty(t *testing.T) {
	k := testKey(t, 9, "e")
	s := TrackingScope{Model: "m", BlockSize: 4}
	long, _ := k.SeqHashes(nil, tokens(40), s)
	short, _ := k.SeqHashes(nil, tokens(22), s) // partial tail not hashed
	if len(short) != 5 || !slices.Equal(short, long[:5]) {
		t.Fatalf("a prefix's identities are not a prefix: %v vs %v", short, long[:5])
	}
	if _, err := k.SeqHashes(nil, tokens(8), TrackingScope{}); !errors.Is(err, ErrBlockSize) {
		t.Fatalf("block size 0: err = %v", err)
	}
}
