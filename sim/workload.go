package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/traces"
)

// ErrBlockSize is returned for an engine block size that does not divide the
// trace's 512-token blocks.
var ErrBlockSize = errors.New("sim: block size must divide 512")

// Prompt is one request of a workload in the form the router and the engines
// consume: its sequence hashes at the engine block size and its lengths.
type Prompt struct {
	Index        int
	Arrival      int64 // nanoseconds from the start of the trace
	InputTokens  int
	OutputTokens int
	// Hashes are the sequence hashes of the prompt's complete blocks.
	Hashes []routing.SeqHash
	// Locals are the local hashes of the same blocks.
	Locals []routing.LocalHash
	// Session is the prompt's session key, empty for none (Mooncake
	// traces carry no sessions).
	Session string
}

// Workload turns trace records into prompts. Every trace hash id stands for
// 512 tokens that are a pure function of the id (a PCG stream seeded by it),
// so two requests share exactly the token prefix the trace says they share,
// at any block size that divides 512. Local hashes are memoised per (hash id,
// sub-block): a sub-block's tokens depend only on them.
type Workload struct {
	blockSize int
	perID     int
	seed      uint64
	memo      map[uint64][]routing.LocalHash
	tokens    []uint32
}

// NewWorkload prepares the synthesis of prompts at the given block size.
func NewWorkload(blockSize int) (*Workload, error) {
	if blockSize <= 0 || traces.MooncakeBlockTokens%blockSize != 0 {
		return nil, fmt.Errorf("%w: %d", ErrBlockSize, blockSize)
	}
	return &Workload{
		blockSize: blockSize,
		perID:     traces.MooncakeBlockTokens / blockSize,
		seed:      routing.HashSeed,
		memo:      make(map[uint64][]routing.LocalHash),
		tokens:    make([]uint32, traces.MooncakeBlockTokens),
	}, nil
}

// TokensOf returns the 512 synthetic tokens behind a trace hash id. The
// vocabulary bound keeps them plausible token ids for a 128k-vocabulary model.
func TokensOf(id uint64, dst []uint32) []uint32 {
	r := rand.New(rand.NewPCG(id, 0x6b7672)) // "kvr"
	for i := 0; i < traces.MooncakeBlockTokens; i++ {
		dst = append(dst, r.Uint32N(128000))
	}
	return dst
}

func (w *Workload) locals(id uint64) []routing.LocalHash {
	if l, ok := w.memo[id]; ok {
		return l
	}
	w.tokens = TokensOf(id, w.tokens[:0])
	l, _ := routing.LocalHashes(make([]routing.LocalHash, 0, w.perID), w.tokens, w.blockSize, w.seed)
	w.memo[id] = l
	return l
}

// Prompt synthesises the prompt of one trace record.
func (w *Workload) Prompt(i int, r traces.Request) Prompt {
	n := r.InputTokens / w.blockSize
	if max := len(r.HashIDs) * w.perID; n > max {
		n = max
	}
	locals := make([]routing.LocalHash, 0, n)
	for _, id := range r.HashIDs {
		locals = append(locals, w.locals(id)...)
	}
	locals = locals[:n]
	return Prompt{
		Index:        i,
		Arrival:      int64(r.Arrival),
		InputTokens:  r.InputTokens,
		OutputTokens: r.OutputTokens,
		Hashes:       routing.SeqHashes(make([]routing.SeqHash, 0, n), locals),
		Locals:       locals,
	}
}

// Prompts synthesises every record of a trace.
func (w *Workload) Prompts(reqs []traces.Request) []Prompt {
	out := make([]Prompt, len(reqs))
	for i, r := range reqs {
		out[i] = w.Prompt(i, r)
	}
	return out
}

// InfiniteCacheBound is the block hit ratio of an infinite cache shared by
// every engine: a block hits when an earlier request had the same prefix.
// No routing policy can beat it.
func InfiniteCacheBound(prompts []Prompt) float64 {
	seen := make(map[routing.SeqHash]struct{})
	var hits, total int
	for _, p := range prompts {
		for _, h := range p.Hashes {
			if _, ok := seen[h]; ok {
				hits++
			} else {
				seen[h] = struct{}{}
			}
		}
		total += len(p.Hashes)
	}
	if total == 0 {
		return 0
	}
	return float64(hits) / float64(total)
}
