package peers

import (
	"context"
	"fmt"
	"math"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
)

// llmdKind selects one of llm-d's in-process index backends.
type llmdKind uint8

const (
	llmdInMemory llmdKind = iota
	llmdCostAware
)

// llmdModel is the model name the token processor folds into the first
// block's hash, as llm-d's event pool does with the model of the topic.
const llmdModel = "bench-model"

// llmdSubject drives one of llm-d's kvblock.Index backends the way its
// event pool and its Indexer.ScoreTokens do: request keys from the token
// processor, Index.Add with the engine's keys and one PodEntry, then
// Index.Lookup and the longest-prefix scorer for a query.
type llmdSubject struct {
	kind    llmdKind
	st      *Stream
	ctx     context.Context
	tp      kvblock.TokenProcessor
	scorer  kvcache.KVBlockScorer
	idx     kvblock.Index
	pods    []string
	podIdx  map[string]int
	entries [][]kvblock.PodEntry
	reqKeys []kvblock.BlockHash
	engKeys []kvblock.BlockHash
	queries [][]kvblock.BlockHash
	scores  map[string]float64
	answers []Answer
}

var _ Subject = (*llmdSubject)(nil)

func newLLMD(kind llmdKind) *llmdSubject {
	return &llmdSubject{kind: kind, ctx: context.Background()}
}

// Prepare computes request keys with llm-d's own token processor (block
// size from the shape, empty hash seed) and builds one PodEntry per worker.
// Pod names are interned, one string per worker, where llm-d's event pool
// takes a substring of each message's topic: this favours llm-d's memory.
func (l *llmdSubject) Prepare(st *Stream) error {
	l.st = st
	var err error
	cfg := &kvblock.TokenProcessorConfig{BlockSizeTokens: st.Shape.BlockTokens}
	if l.tp, err = kvblock.NewChunkedTokenDatabase(cfg); err != nil {
		return fmt.Errorf("llm-d token processor: %w", err)
	}
	if l.scorer, err = kvcache.NewKVBlockScorer(kvcache.DefaultKVBlockScorerConfig()); err != nil {
		return fmt.Errorf("llm-d scorer: %w", err)
	}
	l.preparePods()
	l.reqKeys = make([]kvblock.BlockHash, 0, st.Shape.Blocks())
	l.engKeys = make([]kvblock.BlockHash, 0, st.Shape.Blocks())
	for e := range st.Shape.Events() {
		keys, err := l.keys(e)
		if err != nil {
			return err
		}
		l.reqKeys = append(l.reqKeys, keys...)
		for _, id := range st.EngineIDs(e) {
			l.engKeys = append(l.engKeys, kvblock.BlockHash(id))
		}
	}
	l.queries = make([][]kvblock.BlockHash, len(st.Queries()))
	for q, e := range st.Queries() {
		if l.queries[q], err = l.keys(e); err != nil {
			return err
		}
	}
	return nil
}

func (l *llmdSubject) preparePods() {
	n := l.st.Shape.Workers
	l.pods = make([]string, n)
	l.podIdx = make(map[string]int, n)
	l.entries = make([][]kvblock.PodEntry, n)
	for w := range n {
		l.pods[w] = fmt.Sprintf("10.%d.%d.%d:8000", w>>16&255, w>>8&255, w&255)
		l.podIdx[l.pods[w]] = w
		l.entries[w] = []kvblock.PodEntry{{PodIdentifier: l.pods[w], DeviceTier: "gpu"}}
	}
}

// keys hashes event e's tokens into llm-d request keys (a parentless chain).
func (l *llmdSubject) keys(e int) ([]kvblock.BlockHash, error) {
	keys, err := l.tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, l.st.Tokens(e), llmdModel, nil)
	if err != nil {
		return nil, fmt.Errorf("llm-d keys: %w", err)
	}
	return keys, nil
}

func (l *llmdSubject) Open() error {
	var err error
	switch l.kind {
	case llmdCostAware:
		l.idx, err = kvblock.NewCostAwareMemoryIndex(kvblock.DefaultCostAwareMemoryIndexConfig())
	default:
		l.idx, err = kvblock.NewInMemoryIndex(kvblock.DefaultInMemoryIndexConfig())
	}
	if err != nil {
		return fmt.Errorf("llm-d index: %w", err)
	}
	return nil
}

func (l *llmdSubject) span(e int) (int, int) {
	n := l.st.Shape.SeqBlocks
	return e * n, (e + 1) * n
}

func (l *llmdSubject) Ingest(e int) error {
	a, b := l.span(e)
	return l.idx.Add(l.ctx, l.engKeys[a:b], l.reqKeys[a:b], l.entries[l.st.Worker(e)])
}

func (l *llmdSubject) IngestTokens(e int) error {
	keys, err := l.keys(e)
	if err != nil {
		return err
	}
	a, b := l.span(e)
	return l.idx.Add(l.ctx, l.engKeys[a:b], keys, l.entries[l.st.Worker(e)])
}

func (l *llmdSubject) HashQuery(q int) error {
	_, err := l.keys(l.st.Queries()[q])
	return err
}

// Query runs what ScoreTokens runs after hashing: Lookup over all pods,
// then the longest-prefix score per pod (gpu blocks weigh 1, so a pod's
// score is its prefix depth in blocks).
func (l *llmdSubject) Query(q int) error {
	keys := l.queries[q]
	keyToPods, err := l.idx.Lookup(l.ctx, keys, nil)
	if err != nil {
		return fmt.Errorf("llm-d lookup: %w", err)
	}
	l.scores, err = l.scorer.Score(l.ctx, keys, keyToPods)
	return err
}

func (l *llmdSubject) Answers() []Answer {
	l.answers = l.answers[:0]
	for pod, score := range l.scores {
		w, ok := l.podIdx[pod]
		if !ok {
			w = -1
		}
		l.answers = append(l.answers, Answer{Worker: w, Depth: int(math.Round(score))})
	}
	sortAnswers(l.answers)
	return l.answers
}
