package routing

import (
	"fmt"

	"github.com/zeebo/xxh3"
)

// DefaultTextBlockBytes is the chunk size of text-chunk hashing. At about
// four bytes per token for English text and code, 256 bytes stand for a
// 64-token block, the block size most engines are configured with.
const DefaultTextBlockBytes = 256

// TextSeed derives the seed of text-chunk hashing from the model name, so
// that identical prompts sent to different models never share blocks. The
// LoRA and salt fold in exactly as for token hashing.
func TextSeed(model, lora, salt string) uint64 {
	return Seed(lora, salt) + xxh3.HashStringSeed(model, 2)
}

// TextHashes appends to dst the chained hashes of every complete chunk of
// chunkBytes bytes of text. It is the routing fallback when a request carries
// no token ids: the hashes never match engine events, so it is only useful
// with the approximate index, which learns from the router's own decisions.
// The partial tail is not hashed.
func TextHashes(dst []SeqHash, text string, chunkBytes int, seed uint64) ([]SeqHash, error) {
	if chunkBytes <= 0 {
		return dst, fmt.Errorf("%w: text chunk of %d bytes", ErrBlockSize, chunkBytes)
	}
	var prev SeqHash
	for i := 0; i+chunkBytes <= len(text); i += chunkBytes {
		l := LocalHash(xxh3.HashStringSeed(text[i:i+chunkBytes], seed))
		if i == 0 {
			prev = SeqHash(l)
		} else {
			prev = Chain(prev, l)
		}
		dst = append(dst, prev)
	}
	return dst, nil
}
