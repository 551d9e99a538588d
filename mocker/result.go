package mocker

import (
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// StepResult is everything that happened during one Advance call, in the
// order it happened. Its slices belong to the caller; the events inside are
// shared with the engine's ring and must be treated as read-only.
type StepResult struct {
	// Iterations is the number of iterations completed.
	Iterations int
	// TokensGenerated is the number of output tokens produced.
	TokensGenerated int
	// Admitted lists requests that entered the running set, with the
	// cached prefix they found.
	Admitted []Admission
	// Preempted lists running requests evicted to free KV blocks; they
	// return to the front of the waiting queue and are recomputed.
	Preempted []Preemption
	// FirstTokens lists requests that produced their first output token.
	FirstTokens []FirstToken
	// Finished lists completed requests.
	Finished []Completion
	// Events are the KV events emitted, with contiguous ids.
	Events []routing.Event
}

// Admission is a request entering the running set.
type Admission struct {
	ID string
	At time.Time
	// HitBlocks is the length, in blocks, of the cached prompt prefix found
	// at admission (prefill skips it); PromptBlocks is the number of
	// complete prompt blocks, so HitBlocks/PromptBlocks is the hit ratio.
	// ReceivedBlocks are the blocks after the cached prefix that a prefill
	// engine sent (Request.RemotePrefill); prefill skips them too.
	HitBlocks      int
	ReceivedBlocks int
	PromptBlocks   int
	// Readmission is set when the request had been preempted before.
	Readmission bool
}

// Preemption is a running request pushed back to the waiting queue.
type Preemption struct {
	ID string
	At time.Time
}

// FirstToken is the time a request produced its first output token.
type FirstToken struct {
	ID string
	At time.Time
}

// Completion describes a finished request; TTFT and ITL follow from it.
type Completion struct {
	ID string
	// Arrival is the Submit time, Admitted the first admission, FirstToken
	// the end of the iteration that produced the first token and Done the
	// end of the iteration that produced the last.
	Arrival    time.Time
	Admitted   time.Time
	FirstToken time.Time
	Done       time.Time
	// PromptTokens and OutputTokens are the request's lengths.
	PromptTokens int
	OutputTokens int
	// HitBlocks is the cached prefix found at the first admission and
	// ReceivedBlocks the blocks a prefill engine sent; PromptBlocks the
	// number of complete prompt blocks.
	HitBlocks      int
	ReceivedBlocks int
	PromptBlocks   int
	// Preemptions counts how often the request was preempted.
	Preemptions int
	// MaxITL is the longest gap between consecutive output tokens.
	MaxITL time.Duration
}

// TTFT is the time from arrival to the first output token.
func (c Completion) TTFT() time.Duration { return c.FirstToken.Sub(c.Arrival) }

// MeanITL is the mean gap between consecutive output tokens, zero for a
// single-token request.
func (c Completion) MeanITL() time.Duration {
	if c.OutputTokens < 2 {
		return 0
	}
	return c.Done.Sub(c.FirstToken) / time.Duration(c.OutputTokens-1)
}

// completion summarises a finished request.
func (s *seq) completion(done time.Time) Completion {
	return Completion{
		ID: s.id, Arrival: s.arrival, Admitted: s.admittedAt,
		FirstToken: s.firstToken, Done: done,
		PromptTokens: s.prompt, OutputTokens: s.generated,
		HitBlocks: s.hitBlocks, ReceivedBlocks: s.receivedBlocks, PromptBlocks: len(s.seqs),
		Preemptions: s.preemptions, MaxITL: s.maxITL,
	}
}
