package mocker

import (
	"slices"
	"time"
)

// Disaggregated decode. A request submitted with RemotePrefill had its
// prompt computed by a prefill engine; its KV cache comes over the network
// to this engine, which decodes. The transfer takes
//
//	KVTransferLatency + transferred tokens × KVTransferNanos
//
// (divided by SpeedUp) from Submit, the tokens being the prompt's
// complete blocks but the last token's: the engine computes that token
// itself, as vLLM's decode engine computes the tail of a prompt whose
// full blocks it received, so that it has logits to sample from. Until
// then the request waits apart from the queue, so that a transfer does
// not hold back requests that are ready; once it has its cache, it
// queues as any request, and admission counts the received blocks as
// computed and caches them (publishing them) as it caches blocks an
// iteration computed. The transfer's blocks are not
// reserved while it runs (vLLM allocates them up front), and a request
// preempted later recomputes its prompt: the prefill engine's copy is
// not kept for it.

// TransferTime is how long the KV cache of tokens prompt tokens takes to
// come from a prefill engine, at speed-up 1.
func (t Timing) TransferTime(tokens int) time.Duration {
	return clampDuration(float64(t.KVTransferLatency) + float64(max(tokens, 0))*t.KVTransferNanos)
}

// transferred is the prompt tokens whose cache a remote prefill sends:
// its complete blocks but the one holding its last token.
func (e *Engine) transferred(s *seq) int {
	bs := e.cfg.BlockSize
	return (s.numTokens - 1) / bs * bs
}

// startTransfer schedules s's cache to arrive, keeping the transfers in
// order of arrival.
func (e *Engine) startTransfer(s *seq, now time.Time) {
	s.ready = now.Add(scaled(e.cfg.Timing.TransferTime(e.transferred(s)), e.cfg.SpeedUp))
	i, _ := slices.BinarySearchFunc(e.transfers, s.ready, func(x *seq, t time.Time) int {
		if x.ready.After(t) {
			return 1
		}
		return -1 // equal times keep submission order
	})
	e.transfers = slices.Insert(e.transfers, i, s)
}

// landTransfers queues every request whose cache has come by t.
func (e *Engine) landTransfers(t time.Time) {
	n := 0
	for n < len(e.transfers) && !e.transfers[n].ready.After(t) {
		e.waiting.pushBack(e.transfers[n])
		n++
	}
	if n > 0 {
		clear(e.transfers[:n])
		e.transfers = e.transfers[n:]
	}
}

// nextTransfer is when the next cache arrives, if one is coming.
func (e *Engine) nextTransfer() (time.Time, bool) {
	if len(e.transfers) == 0 {
		return time.Time{}, false
	}
	return e.transfers[0].ready, true
}

// cancelTransfer drops request id from the transfers and reports whether
// it was there.
func (e *Engine) cancelTransfer(id string) bool {
	i := slices.IndexFunc(e.transfers, func(s *seq) bool { return s.id == id })
	if i < 0 {
		return false
	}
	e.transfers = slices.Delete(e.transfers, i, i+1)
	return true
}
