package peers

import (
	"fmt"
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/routing"
)

// vocabSize bounds the generated token ids (a Qwen-sized vocabulary).
const vocabSize = 151936

// Stream is the event stream and query sequence of one Shape: the tokens of
// every stored event, the engine's block ids, and which events are queried.
// Tokens and ids live in pointer-free slabs so that they cost the garbage
// collector nothing while an index is measured beside them.
type Stream struct {
	Shape   Shape
	tokens  []uint32
	engine  []uint64
	queries []int
}

// NewStream generates the stream of a valid shape. Event e is sequence
// e mod Seqs of worker e / Seqs.
func NewStream(s Shape) (*Stream, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	st := &Stream{
		Shape:  s,
		tokens: make([]uint32, s.Blocks()*s.BlockTokens),
		engine: make([]uint64, 0, s.Blocks()),
	}
	for e := range s.Events() {
		st.fillTokens(e)
		var err error
		if st.engine, err = engineIDs(st.engine, st.Tokens(e), s.BlockTokens); err != nil {
			return nil, err
		}
	}
	r := rand.New(rand.NewPCG(s.Seed, 0x71756572))
	st.queries = make([]int, s.Queries)
	for i := range st.queries {
		st.queries[i] = r.IntN(s.Events())
	}
	return st, nil
}

// engineIDs appends the engine's block ids of one event. Engines such as
// vLLM name a block by a chained hash of its content; both subjects treat
// the ids as opaque, so any content-derived value will do.
func engineIDs(dst []uint64, tokens []uint32, blockTokens int) ([]uint64, error) {
	hs, err := routing.BlockHashes(nil, tokens, blockTokens, routing.Seed("", "engine"))
	if err != nil {
		return dst, fmt.Errorf("engine ids: %w", err)
	}
	for _, h := range hs {
		dst = append(dst, uint64(h))
	}
	return dst, nil
}

// fillTokens writes event e's tokens: the group's prompt blocks, shared by
// every worker of the group, then blocks of the worker's own.
func (st *Stream) fillTokens(e int) {
	s := st.Shape
	w, seq := e/s.Seqs, e%s.Seqs
	toks := st.Tokens(e)
	for b := range s.SeqBlocks {
		id := uint64(e)<<8 | uint64(b)
		if b < s.PromptBlocks {
			id = 1<<63 | uint64(w/s.Group)<<24 | uint64(seq%s.Prompts)<<8 | uint64(b)
		}
		r := rand.New(rand.NewPCG(s.Seed, id))
		for i := range s.BlockTokens {
			toks[b*s.BlockTokens+i] = r.Uint32N(vocabSize)
		}
	}
}

// Tokens returns event e's token ids (SeqBlocks whole blocks).
func (st *Stream) Tokens(e int) []uint32 {
	n := st.Shape.SeqBlocks * st.Shape.BlockTokens
	return st.tokens[e*n : (e+1)*n : (e+1)*n]
}

// EngineIDs returns the engine's ids of event e's blocks.
func (st *Stream) EngineIDs(e int) []uint64 {
	n := st.Shape.SeqBlocks
	return st.engine[e*n : (e+1)*n : (e+1)*n]
}

// Worker returns the index of the worker that stores event e.
func (st *Stream) Worker(e int) int { return e / st.Shape.Seqs }

// Queries returns the events whose tokens are the queries, in order.
func (st *Stream) Queries() []int { return st.queries }

// Answer is one worker's prefix depth in blocks for a query.
type Answer struct {
	Worker int
	Depth  int
}

// Expected returns the answer every subject must give for a query of event
// e, sorted by worker: the owner holds the whole sequence, the other workers
// of its group hold the system prompt.
func (st *Stream) Expected(e int) []Answer {
	s := st.Shape
	w := st.Worker(e)
	first := w / s.Group * s.Group
	var out []Answer
	for g := first; g < min(first+s.Group, s.Workers); g++ {
		d := s.PromptBlocks
		if g == w {
			d = s.SeqBlocks
		}
		out = append(out, Answer{Worker: g, Depth: d})
	}
	return out
}
