package peers

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrShape reports an unusable fleet shape.
var ErrShape = errors.New("peers: invalid fleet shape")

// Shape is the fleet every subject ingests and is queried against.
type Shape struct {
	// Workers is the number of workers (pods, for llm-d).
	Workers int
	// Group is how many consecutive workers share the same system prompts.
	Group int
	// Prompts is the number of system prompts per group; sequence s of a
	// worker starts with prompt s mod Prompts.
	Prompts int
	// PromptBlocks is the length of a system prompt in blocks.
	PromptBlocks int
	// Seqs is the number of sequences (stored events) per worker.
	Seqs int
	// SeqBlocks is the length of a sequence in blocks, prompt included:
	// the depth of a full hit.
	SeqBlocks int
	// BlockTokens is the KV block size in tokens (vLLM's default is 16).
	BlockTokens int
	// Queries is the number of prefix queries each subject answers.
	Queries int
	// Seed seeds the token and query generators.
	Seed uint64
}

// DefaultShape is the fleet of the exact index's own benchmarks: 1,000
// workers in groups of 8, each holding 50 sequences of 24 blocks that start
// with one of its group's 8 four-block system prompts, so 1,032,000 (worker,
// block) pairs from 1,200,000 block events.
func DefaultShape() Shape {
	return Shape{
		Workers: 1000, Group: 8, Prompts: 8, PromptBlocks: 4,
		Seqs: 50, SeqBlocks: 24, BlockTokens: 16, Queries: 20000, Seed: 1,
	}
}

// Validate checks that the shape describes a fleet the generator can build.
func (s Shape) Validate() error {
	switch {
	case s.Workers <= 0 || s.Group <= 0 || s.Prompts <= 0 || s.Seqs <= 0 || s.Queries <= 0:
		return fmt.Errorf("%w: counts must be positive: %+v", ErrShape, s)
	case s.Seqs < s.Prompts:
		return fmt.Errorf("%w: %d sequences cannot cover %d prompts", ErrShape, s.Seqs, s.Prompts)
	case s.PromptBlocks <= 0 || s.SeqBlocks <= s.PromptBlocks:
		return fmt.Errorf("%w: need 0 < prompt blocks (%d) < sequence blocks (%d)", ErrShape, s.PromptBlocks, s.SeqBlocks)
	case s.BlockTokens <= 0:
		return fmt.Errorf("%w: block size %d", ErrShape, s.BlockTokens)
	}
	return nil
}

// Events is the number of stored events, one per sequence.
func (s Shape) Events() int { return s.Workers * s.Seqs }

// Blocks is the number of block events: every block of every stored event.
func (s Shape) Blocks() int { return s.Events() * s.SeqBlocks }

// Pairs is the number of distinct (worker, block) pairs: each worker holds
// its group's prompts once and its own blocks after them.
func (s Shape) Pairs() int {
	return s.Workers * (s.Prompts*s.PromptBlocks + s.Seqs*(s.SeqBlocks-s.PromptBlocks))
}

// ParseShape decodes a shape written by ChildArgs and validates it.
func ParseShape(s string) (Shape, error) {
	var sh Shape
	if err := json.Unmarshal([]byte(s), &sh); err != nil {
		return sh, fmt.Errorf("%w: %w", ErrShape, err)
	}
	return sh, sh.Validate()
}
