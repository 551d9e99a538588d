package routing

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// HashSeed is the XXH3 seed of local block hashes for the base model and of
// every sequence-hash chain step. It is part of the wire contract with the
// engines' event publishers and must never change.
const HashSeed uint64 = 1337

// ErrBlockSize is returned for a block size that is not positive.
var ErrBlockSize = errors.New("routing: block size must be positive")

// littleEndian is true on machines whose native u32 layout is little-endian,
// where a token slice can be hashed in place without a copy.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Seed derives the local-hash seed for a request. A LoRA adapter name and a
// cache salt each fold into the base seed by wrapping addition, so requests
// for different adapters or tenants never share blocks. Empty strings count
// as absent: the base model without a salt hashes with HashSeed.
func Seed(lora, salt string) uint64 {
	s := HashSeed
	if lora != "" {
		s += xxh3.HashString(lora)
	}
	if salt != "" {
		s += xxh3.HashStringSeed(salt, 1)
	}
	return s
}

// HashBlock returns the local hash of one block of tokens.
func HashBlock(tokens []uint32, seed uint64) LocalHash {
	if len(tokens) == 0 {
		return LocalHash(xxh3.HashSeed(nil, seed))
	}
	if littleEndian {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), len(tokens)*4)
		return LocalHash(seededHash(fastLong(seed), b, seed))
	}
	b := make([]byte, len(tokens)*4)
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[i*4:], t)
	}
	return LocalHash(xxh3.HashSeed(b, seed))
}

// Chain extends the sequence hash of a prefix by one block: XXH3-64 with
// seed 1337 of the 16 bytes le64(parent) ‖ le64(local).
//
// It is XXH3's 9-to-16-byte path written out for exactly 16 bytes and the
// fixed seed, with the secret words folded into constants: a third of the
// cost of a general call, and the chain runs once per block on the request
// path. TestChainMatchesXXH3 pins it to the library.
func Chain(parent SeqHash, local LocalHash) SeqHash {
	lo := uint64(parent) ^ chainKeyLo
	hi := uint64(local) ^ chainKeyHi
	mhi, mlo := bits.Mul64(lo, hi)
	h := 16 + bits.ReverseBytes64(lo) + hi + (mhi ^ mlo)
	h ^= h >> 37
	h *= 0x165667919E3779F9
	return SeqHash(h ^ (h >> 32))
}

// chainKeyLo and chainKeyHi are XXH3's default-secret words at offsets 24/32
// and 40/48, combined with seed 1337 as the 9-to-16-byte path does.
const (
	chainKeyLo = (0x1f67b3b7a4a44072 ^ 0x78e5c0cc4ee679cb) + HashSeed
	chainKeyHi = (0x2172ffcc7dd05a82 ^ 0x8e2443f7744608b8) - HashSeed
)

// LocalHashes appends to dst the local hash of every complete block of
// tokens; the partial tail is not hashed.
func LocalHashes(dst []LocalHash, tokens []uint32, blockSize int, seed uint64) ([]LocalHash, error) {
	if blockSize <= 0 {
		return dst, fmt.Errorf("%w: %d", ErrBlockSize, blockSize)
	}
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		dst = append(dst, HashBlock(tokens[i:i+blockSize], seed))
	}
	return dst, nil
}

// SeqHashes appends to dst the sequence hashes of a chain of local hashes
// that starts at the first block of a sequence.
func SeqHashes(dst []SeqHash, locals []LocalHash) []SeqHash {
	var prev SeqHash
	for i, l := range locals {
		if i == 0 {
			prev = SeqHash(l)
		} else {
			prev = Chain(prev, l)
		}
		dst = append(dst, prev)
	}
	return dst
}

// BlockHashes appends to dst the sequence hashes of every complete block of
// tokens. It is the request path's hashing step and does not allocate when
// dst has room for len(tokens)/blockSize hashes.
func BlockHashes(dst []SeqHash, tokens []uint32, blockSize int, seed uint64) ([]SeqHash, error) {
	if blockSize <= 0 {
		return dst, fmt.Errorf("%w: %d", ErrBlockSize, blockSize)
	}
	n := len(tokens) / blockSize
	if n == 0 {
		return dst, nil
	}
	if !littleEndian {
		locals, err := LocalHashes(make([]LocalHash, 0, n), tokens, blockSize, seed)
		return SeqHashes(dst, locals), err
	}
	// One byte view of the whole prompt; each block hashes a window of it.
	b := unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), n*blockSize*4)
	step := blockSize * 4
	long := fastLong(seed)
	prev := SeqHash(seededHash(long, b[:step], seed))
	dst = append(dst, prev)
	for off := step; off < len(b); off += step {
		prev = Chain(prev, LocalHash(seededHash(long, b[off:off+step], seed)))
		dst = append(dst, prev)
	}
	return dst, nil
}

// seededHash is XXH3-64 of b with seed, through the cached-secret long
// path when one is available for the seed and b is long enough to use it.
func seededHash(long *longHasher, b []byte, seed uint64) uint64 {
	if long != nil && len(b) > 240 {
		return long.hash(b)
	}
	return xxh3.HashSeed(b, seed)
}
