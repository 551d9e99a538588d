package routing

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zeebo/xxh3"
	"lukechampine.com/blake3"
)

// Tracking hash algorithms: the names of --router-tracking-hash.
const (
	// TrackingPublic tracks active sequences by their public sequence
	// hashes (the same as the index's): anyone who knows a prompt can
	// compute its identity.
	TrackingPublic = "public-xxh3-v1"
	// TrackingKeyed tracks active sequences by hashes seeded from a
	// secret key, so that the identities the router books (and that
	// travel between routers) do not reveal which prompts share prefixes
	// to whoever lacks the key.
	TrackingKeyed = "keyed-xxh3-v1"
)

// TrackingKeyBytes is the exact length of a tracking key: BLAKE3's key
// size. A longer or shorter file is refused rather than truncated or
// padded, which would silently weaken it.
const TrackingKeyBytes = 32

// MaxTrackingKeyIDBytes bounds a key id; it names a key epoch in logs, and
// enters every scope's derivation.
const MaxTrackingKeyIDBytes = 128

// ErrTrackingKey is returned for a tracking key or key id that is not
// valid.
var ErrTrackingKey = errors.New("routing: invalid tracking key")

// trackingDomain separates the tracking seeds' derivation from any other
// use of the same key.
const trackingDomain = "kvrouter.tracking-seeds." + TrackingKeyed

// TrackingKey derives keyed sequence identities for active-request
// tracking. Only the load tracker uses them: the exact and approximate
// indexes, KV events and engine hashes keep the public hashes, which the
// engines compute too. A TrackingKey is immutable and safe for concurrent
// use; rotating the key means a new TrackingKey (and, as with the
// reference router, restarting every router, since bookings made under the
// old key no longer match).
type TrackingKey struct {
	key [TrackingKeyBytes]byte
	id  string
}

// NewTrackingKey checks and copies a key of exactly TrackingKeyBytes bytes
// and its non-empty id (the key epoch's name).
func NewTrackingKey(key []byte, id string) (*TrackingKey, error) {
	switch {
	case len(key) != TrackingKeyBytes:
		return nil, fmt.Errorf("%w: key is %d bytes, want exactly %d", ErrTrackingKey, len(key), TrackingKeyBytes)
	case id == "":
		return nil, fmt.Errorf("%w: key id must not be empty", ErrTrackingKey)
	case len(id) > MaxTrackingKeyIDBytes:
		return nil, fmt.Errorf("%w: key id is %d bytes, over %d", ErrTrackingKey, len(id), MaxTrackingKeyIDBytes)
	}
	k := &TrackingKey{id: id}
	copy(k.key[:], key)
	return k, nil
}

// ID is the key's id.
func (k *TrackingKey) ID() string { return k.id }

// TrackingScope is what one request's tracking identities depend on, so
// that equal prompts under different models, adapters, tenants or block
// sizes never share an identity.
type TrackingScope struct {
	Model        string
	RoutingGroup string
	BlockSize    int
	CacheSalt    string
	LoRA         string
	Eagle        bool
}

// Seeds derives the scope's block and chain seeds: one keyed BLAKE3 digest
// of the algorithm, key id and scope fields (each length-prefixed, so no
// two scopes encode alike), split into two independent 64-bit seeds.
func (k *TrackingKey) Seeds(s TrackingScope) (block, chain uint64) {
	h := blake3.New(16, k.key[:])
	var buf [8]byte
	field := func(v string) {
		binary.LittleEndian.PutUint64(buf[:], uint64(len(v)))
		h.Write(buf[:])
		h.Write([]byte(v))
	}
	field(trackingDomain)
	field(k.id)
	field(s.Model)
	field(s.RoutingGroup)
	binary.LittleEndian.PutUint64(buf[:], uint64(s.BlockSize))
	h.Write(buf[:])
	field(s.CacheSalt) // empty is absent, as for the public seed
	field(s.LoRA)
	eagle := byte(0)
	if s.Eagle {
		eagle = 1
	}
	h.Write([]byte{eagle})
	d := h.Sum(nil)
	return binary.LittleEndian.Uint64(d[:8]), binary.LittleEndian.Uint64(d[8:])
}

// SeqHashes appends to dst the keyed sequence hashes of every complete
// block of tokens at the scope's block size: the public construction
// (local hash of the block's little-endian tokens, chained through the
// 16 bytes le64(parent) ‖ le64(local)) with the scope's two seeds in place
// of 1337.
func (k *TrackingKey) SeqHashes(dst []SeqHash, tokens []uint32, s TrackingScope) ([]SeqHash, error) {
	if s.BlockSize <= 0 {
		return dst, fmt.Errorf("%w: %d", ErrBlockSize, s.BlockSize)
	}
	blockSeed, chainSeed := k.Seeds(s)
	var prev SeqHash
	var pair [16]byte
	for i := 0; i+s.BlockSize <= len(tokens); i += s.BlockSize {
		local := HashBlock(tokens[i:i+s.BlockSize], blockSeed)
		if i == 0 {
			prev = SeqHash(local)
		} else {
			binary.LittleEndian.PutUint64(pair[:8], uint64(prev))
			binary.LittleEndian.PutUint64(pair[8:], uint64(local))
			prev = SeqHash(xxh3.HashSeed(pair[:], chainSeed))
		}
		dst = append(dst, prev)
	}
	return dst, nil
}
