package mocker

import (
	"math"
	"time"
)

// Batch is the composition of one iteration, the input of the cost model.
type Batch struct {
	// PrefillTokens is the number of new prompt tokens computed, over all
	// prefill chunks of the iteration.
	PrefillTokens int64
	// AttentionPairs is the number of (query, key) pairs the prefill chunks
	// attend over; ChunkPairs gives it for one chunk.
	AttentionPairs int64
	// Decodes is the number of requests decoding one token.
	Decodes int64
	// DecodeContext is the total context, in tokens, that the decodes read.
	DecodeContext int64
}

// ChunkPairs is the number of causal attention pairs of a prefill chunk of n
// new tokens after context cached or earlier-computed tokens: each new token
// attends to the context and to the new tokens up to itself.
func ChunkPairs(context, n int) int64 {
	c, k := int64(context), int64(n)
	return k*c + k*(k+1)/2
}

// add folds one scheduled chunk into the batch. A chunk of one token whose
// context already holds the whole sequence but one is a decode.
func (b *Batch) add(context, n int, decode bool) {
	if decode {
		b.Decodes++
		b.DecodeContext += int64(context) + 1
		return
	}
	b.PrefillTokens += int64(n)
	b.AttentionPairs += ChunkPairs(context, n)
}

// IterationTime is the duration of one iteration of batch b at speed-up 1.
// It is non-decreasing in every field of b.
func (t Timing) IterationTime(b Batch) time.Duration {
	dense := float64(b.PrefillTokens+b.Decodes) * t.TokenNanos
	ns := math.Max(float64(t.WeightRead), dense)
	ns += float64(b.AttentionPairs) * t.AttentionPairNanos
	ns += float64(b.DecodeContext) * t.KVReadNanos
	ns += float64(t.IterationOverhead)
	return clampDuration(ns)
}

// scaled divides an iteration time by the speed-up, keeping at least one
// nanosecond so that virtual time always moves forward.
func scaled(d time.Duration, speedUp float64) time.Duration {
	return max(clampDuration(float64(d)/speedUp), 1)
}

// clampDuration converts nanoseconds to a Duration without overflow; a
// pathological batch saturates at about 292 years instead of wrapping.
func clampDuration(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
