package kvrpb

import "github.com/zeebo/xxh3"

// SessionKeyHashSeed separates session-key hashes from every other XXH3
// use of the project (block hashes are seeded with 1337 and its LoRA and
// salt variants; rendezvous weights with DC-name hashes): "kvrsess1" as a
// big-endian uint64. Changing it changes the wire contract of
// ownership.proto and of the relays' session summaries, so it is never
// changed in place: a new function needs a new hash scheme name.
const SessionKeyHashSeed uint64 = 0x6b76727365737331

// SessionKeyHash is the 64-bit hash of a session binding key that the
// ownership change stream (OwnershipBatch.sessions_bound and
// sessions_unbound, OwnershipSnapshotChunk.sessions) and the relays'
// session summaries carry: XXH3-64 of the key's bytes seeded with
// SessionKeyHashSeed. It is defined here, beside the wire types, so that
// the router cluster (consensus) and the relay compute it alike without
// importing each other. Two keys that collide are one summary entry; at
// 64 bits the chance that any two of a million live sessions collide is
// about 3 in 10^8, and a collision costs at most an extra or a skipped
// lookup (relay/gateway), never a binding.
func SessionKeyHash(key string) uint64 {
	return xxh3.HashStringSeed(key, SessionKeyHashSeed)
}
