package routing

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The XXH3-64 long-input path (inputs over 240 bytes) with a seed derives a
// 192-byte secret from the seed before hashing. zeebo/xxh3 re-derives it on
// every call, about 16 ns of the ~34 ns a 64-token block (256 bytes) costs,
// and a request hashes every block with the same seed. On amd64 with AVX2,
// blocks hashed with the base seed therefore run the long path here, with
// the secret derived once and the stripe accumulation in AVX2 assembly
// (xxh3long_amd64.s). The output is XXH3-64 bit for bit:
// TestSeededLongPathMatchesXXH3 compares it with zeebo/xxh3 at every length
// up to 5,000 bytes. Everything else goes to zeebo/xxh3.

//go:noescape
func accumStripesAVX2(acc *[8]uint64, data unsafe.Pointer, secret unsafe.Pointer, stripes int)

const (
	secretSize      = 192
	stripeLen       = 64
	stripesPerBlock = (secretSize - stripeLen) / 8
	blockLen        = stripeLen * stripesPerBlock
	prime32_1       = 2654435761
	prime32_2       = 2246822519
	prime32_3       = 3266489917
	prime64_1       = 11400714785074694791
	prime64_2       = 14029467366897019727
	prime64_3       = 1609587929392839161
	prime64_4       = 9650029242287828579
	prime64_5       = 2870177450012600261
)

// defaultSecret is XXH3's published default secret.
var defaultSecret = [secretSize]byte{
	0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
	0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
	0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
	0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
	0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
	0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
	0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
	0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
	0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
	0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
	0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
	0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
}

// longHasher is the long path for one seed, with its derived secret.
type longHasher struct {
	seed   uint64
	secret [secretSize]byte
}

func newLongHasher(seed uint64) *longHasher {
	h := &longHasher{seed: seed}
	le := binary.LittleEndian
	for i := 0; i < secretSize; i += 16 {
		le.PutUint64(h.secret[i:], le.Uint64(defaultSecret[i:])+seed)
		le.PutUint64(h.secret[i+8:], le.Uint64(defaultSecret[i+8:])-seed)
	}
	return h
}

// baseLong serves the base-model seed when the CPU has AVX2.
var baseLong = func() *longHasher {
	if !cpu.X86.HasAVX2 {
		return nil
	}
	return newLongHasher(HashSeed)
}()

// fastLong returns the long path for seed, or nil to use zeebo/xxh3.
func fastLong(seed uint64) *longHasher {
	if seed == HashSeed {
		return baseLong
	}
	return nil
}

// hash is XXH3-64 of b (len(b) > 240) with h's seed.
func (h *longHasher) hash(b []byte) uint64 {
	n := len(b)
	acc := [8]uint64{prime32_3, prime64_1, prime64_2, prime64_3, prime64_4, prime32_2, prime64_5, prime32_1}
	p, sec := unsafe.Pointer(unsafe.SliceData(b)), unsafe.Pointer(&h.secret[0])
	blocks := (n - 1) / blockLen
	for bl := 0; bl < blocks; bl++ {
		accumStripesAVX2(&acc, unsafe.Add(p, bl*blockLen), sec, stripesPerBlock)
		scramble(&acc, h.secret[secretSize-stripeLen:])
	}
	stripes := ((n - 1) - blocks*blockLen) / stripeLen
	accumStripesAVX2(&acc, unsafe.Add(p, blocks*blockLen), sec, stripes)
	accumStripesAVX2(&acc, unsafe.Add(p, n-stripeLen), unsafe.Add(sec, secretSize-stripeLen-7), 1)
	return mergeAccs(&acc, h.secret[11:], uint64(n)*prime64_1)
}

func scramble(acc *[8]uint64, sec []byte) {
	sec = sec[:64]
	for i := range acc {
		a := acc[i]
		a ^= a >> 47
		a ^= binary.LittleEndian.Uint64(sec[i*8:])
		acc[i] = a * prime32_1
	}
}

func mergeAccs(acc *[8]uint64, sec []byte, start uint64) uint64 {
	sec = sec[:64]
	le := binary.LittleEndian
	for i := 0; i < 4; i++ {
		hi, lo := bits.Mul64(acc[2*i]^le.Uint64(sec[16*i:]), acc[2*i+1]^le.Uint64(sec[16*i+8:]))
		start += hi ^ lo
	}
	start ^= start >> 37
	start *= 0x165667919E3779F9
	return start ^ (start >> 32)
}
