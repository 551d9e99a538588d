package mocker

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// Errors returned by Submit.
var (
	// ErrBadRequest is returned for a request that is malformed.
	ErrBadRequest = errors.New("mocker: bad request")
	// ErrTooLong is returned for a request that can never fit the engine:
	// its prompt plus MaxTokens needs more blocks than the cache holds, or
	// exceeds Config.MaxModelLen.
	ErrTooLong = errors.New("mocker: request too long for engine")
	// ErrDuplicateID is returned when a request with the same id is still
	// in flight on the engine.
	ErrDuplicateID = errors.New("mocker: duplicate request id")
	// ErrTimeBackwards is returned when Submit is given a time before one
	// the engine has already seen.
	ErrTimeBackwards = errors.New("mocker: time went backwards")
)

// Request is one inference request. The prompt is given either as token ids
// (Tokens) or, so that a simulator need not materialise long prompts, as the
// router's local hashes of its complete blocks (Locals) plus its length in
// tokens (PromptTokens); Seqs may carry the matching sequence hashes when the
// caller already has them.
type Request struct {
	// ID names the request in results; it must be unique among the
	// requests in flight on the engine.
	ID string
	// Tokens are the prompt token ids. When set, Locals, Seqs and
	// PromptTokens must be empty.
	Tokens []uint32
	// HashSeed is the local-hash seed used with Tokens (routing.Seed of the
	// LoRA and salt); zero means routing.HashSeed.
	HashSeed uint64
	// Locals are the local hashes of the prompt's complete blocks, used when
	// Tokens is empty; len(Locals) must be PromptTokens / BlockSize.
	Locals []routing.LocalHash
	// Seqs are the sequence hashes matching Locals, or nil to have them
	// computed. When given they are checked against Locals.
	Seqs []routing.SeqHash
	// PromptTokens is the prompt length when Tokens is empty.
	PromptTokens int
	// MaxTokens is the number of tokens to generate (at least one); the
	// simulated request always generates exactly this many.
	MaxTokens int
	// RemotePrefill makes the engine a disaggregated decode engine for this
	// request: a prefill engine computed the prompt, and its KV cache comes
	// over the network (transfer.go). The request waits for the transfer,
	// then computes only the prompt's last partial block (at least one
	// token) before it decodes.
	RemotePrefill bool
}

// seq is the engine's state of one request.
type seq struct {
	id        string
	arrival   time.Time
	prompt    int
	maxTokens int
	seqs      []routing.SeqHash
	locals    []routing.LocalHash

	// numTokens is prompt plus generated tokens; computed of them have
	// their KV in the cache. After a preemption computed restarts from the
	// cached prefix and the whole sequence is recomputed as a prefill.
	numTokens int
	computed  int
	generated int
	// refs are the cached prompt blocks the request holds, a prefix of
	// seqs; held counts all its blocks, so held-len(refs) are anonymous.
	refs []*block
	held int

	// remote is set while the prompt's cache is still to come from a
	// prefill engine (Request.RemotePrefill); ready is when it has come.
	// A request readmitted after a preemption recomputes its prompt.
	remote bool
	ready  time.Time

	admitted bool
	// canceled is set by Cancel on a running request; the end of the
	// iteration in flight releases it.
	canceled   bool
	admittedAt time.Time
	hitBlocks  int
	// receivedBlocks are the prompt blocks a prefill engine sent.
	receivedBlocks int
	preemptions    int
	firstToken     time.Time
	lastToken      time.Time
	maxITL         time.Duration
}

// anon is the number of blocks the request holds that are not cached.
func (s *seq) anon() int { return s.held - len(s.refs) }

// newSeq validates req against cfg and builds its engine state.
func newSeq(req Request, cfg *Config, now time.Time) (*seq, error) {
	if req.ID == "" {
		return nil, fmt.Errorf("%w: empty id", ErrBadRequest)
	}
	if req.MaxTokens < 1 {
		return nil, fmt.Errorf("%w: %s: MaxTokens must be at least 1, got %d", ErrBadRequest, req.ID, req.MaxTokens)
	}
	prompt, locals, seqs, err := promptHashes(req, cfg.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.ID, err)
	}
	if err := checkLength(prompt, req.MaxTokens, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", req.ID, err)
	}
	return &seq{
		id: req.ID, arrival: now, prompt: prompt, maxTokens: req.MaxTokens,
		seqs: seqs, locals: locals, numTokens: prompt, remote: req.RemotePrefill,
	}, nil
}

// checkLength refuses requests that could never run, so that a request that
// is alone on the engine always obtains its blocks.
func checkLength(prompt, maxTokens int, cfg *Config) error {
	total := int64(prompt) + int64(maxTokens)
	if cfg.MaxModelLen > 0 && total > int64(cfg.MaxModelLen) {
		return fmt.Errorf("%w: %d tokens, MaxModelLen %d", ErrTooLong, total, cfg.MaxModelLen)
	}
	// The last generated token never enters the KV cache.
	if blocksFor(total-1, cfg.BlockSize) > int64(cfg.NumBlocks) {
		return fmt.Errorf("%w: %d tokens need more than %d blocks", ErrTooLong, total, cfg.NumBlocks)
	}
	return nil
}

// promptHashes returns the prompt length and the local and sequence hashes
// of its complete blocks, from whichever form the request carries.
func promptHashes(req Request, bs int) (int, []routing.LocalHash, []routing.SeqHash, error) {
	if len(req.Tokens) > 0 {
		if len(req.Locals) > 0 || len(req.Seqs) > 0 || req.PromptTokens != 0 {
			return 0, nil, nil, fmt.Errorf("%w: Tokens and precomputed hashes are exclusive", ErrBadRequest)
		}
		seed := req.HashSeed
		if seed == 0 {
			seed = routing.HashSeed
		}
		locals, err := routing.LocalHashes(make([]routing.LocalHash, 0, len(req.Tokens)/bs), req.Tokens, bs, seed)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		return len(req.Tokens), locals, routing.SeqHashes(make([]routing.SeqHash, 0, len(locals)), locals), nil
	}
	if req.PromptTokens < 1 {
		return 0, nil, nil, fmt.Errorf("%w: empty prompt", ErrBadRequest)
	}
	if len(req.Locals) != req.PromptTokens/bs {
		return 0, nil, nil, fmt.Errorf("%w: %d local hashes for %d tokens in blocks of %d", ErrBadRequest, len(req.Locals), req.PromptTokens, bs)
	}
	locals := append([]routing.LocalHash(nil), req.Locals...)
	seqs := routing.SeqHashes(make([]routing.SeqHash, 0, len(locals)), locals)
	if req.Seqs != nil && !slices.Equal(req.Seqs, seqs) {
		return 0, nil, nil, fmt.Errorf("%w: Seqs do not chain from Locals", ErrBadRequest)
	}
	return req.PromptTokens, locals, seqs, nil
}

// blocksFor is the number of blocks that hold n tokens (a partial block
// counts as one).
func blocksFor(n int64, bs int) int64 {
	if n <= 0 {
		return 0
	}
	return (n + int64(bs) - 1) / int64(bs)
}

// EngineHash is the simulated engine's own id for the block whose router
// sequence hash is s. Real engines hash blocks their own way, so the router
// must never rely on the two being equal; this bijective mix (the SplitMix64
// finaliser) keeps them different while guaranteeing that distinct blocks
// get distinct ids.
func EngineHash(s routing.SeqHash) routing.EngineHash {
	z := uint64(s) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return routing.EngineHash(z ^ (z >> 31))
}
