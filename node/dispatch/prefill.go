package dispatch

import (
	"cmp"
	"context"
	"errors"

	"github.com/kvrouter/kvrouter/routing"
)

// PrefillHop is the prefill half of a disaggregated Decision: the engine
// that computes the prompt's KV cache and hands it off to the decision's
// decode engine. Its load is booked apart from the decode hop's and ends
// with the prefill request, through Done, which must be called from the
// request's goroutine; Decision.Done ends a hop left unended.
type PrefillHop struct {
	Worker routing.Worker
	// EndpointURL is the engine's OpenAI-compatible base URL (no /v1).
	EndpointURL string
	// BootstrapPort is the engine's SGLang KV bootstrap port, on the host
	// of EndpointURL; 0 when it has none, and the hand-off is vLLM's (the
	// prefill answer's kv_transfer_params go to the decode request).
	BootstrapPort uint32
	// CachedBlocks is how many of the prompt's blocks the engine holds
	// (predicted).
	CachedBlocks int
	// DPSize is the engine's number of data-parallel ranks: SGLang picks
	// the prefill rank of a request by its bootstrap room modulo DPSize,
	// so the room must name Worker.Rank.
	DPSize uint32

	done func(error)
	lost context.Context
}

// NewPrefillHop builds a prefill hop with its end callback; the
// dispatcher uses it, and tests of the frontend use it to fake one.
func NewPrefillHop(w routing.Worker, endpoint string, bootstrapPort uint32, done func(error)) *PrefillHop {
	return &PrefillHop{Worker: w, EndpointURL: endpoint, BootstrapPort: bootstrapPort, done: done}
}

// Done reports the end of the prefill request: nil once the engine
// answered with its hand-off, ErrEngineUnreachable (wrapped) when the
// engine could not be reached or failed before answering, which leaves
// it out of the prefill candidates for Config.SuspectTimeout, any other
// error otherwise. Later calls do nothing.
func (h *PrefillHop) Done(err error) {
	if h.done != nil {
		h.done(err)
		h.done = nil
	}
}

// abandon ends a hop the frontend did not end, with the decode hop's
// outcome err: an unreachable decode engine says nothing of the prefill
// engine.
func (h *PrefillHop) abandon(err error) {
	if err != nil {
		err = errHopAbandoned
	}
	h.Done(err)
}

// errHopAbandoned ends a prefill hop whose request ended without it.
var errHopAbandoned = errors.New("dispatch: the request ended before its prefill hop")

// Lost is done when the registry dropped the prefill engine for silence,
// as Decision.Lost is for the decode engine.
func (h *PrefillHop) Lost() context.Context { return cmp.Or(h.lost, context.Background()) }
