package frontend

import (
	"net/http"
	"strconv"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

// The reference router's priority headers. They carry what
// nvext.agent_hints.priority and strict_priority carry, for clients (or a
// gateway in front) that cannot edit the body; a value in the body wins.
const (
	PriorityHeader       = "X-Dynamo-Request-Priority"
	StrictPriorityHeader = "X-Dynamo-Request-Strict-Priority"
)

// priorityHeaders fills the priorities the body left unset from the
// headers, refusing a value the body field would refuse, naming the
// header.
func (x *NVExt) priorityHeaders(h http.Header) error {
	hints := &x.AgentHints
	if v := h.Get(PriorityHeader); v != "" && hints.Priority == nil {
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || !(p >= 0) || p > dispatch.MaxPriority {
			return oaiedge.Invalid(PriorityHeader, "%s must be a number in [0, %d], got %q", PriorityHeader, dispatch.MaxPriority, v)
		}
		hints.Priority = &p
	}
	if v := h.Get(StrictPriorityHeader); v != "" && hints.StrictPriority == nil {
		p, err := strconv.ParseInt(v, 10, 64)
		if err != nil || p < 0 || p > MaxStrictPriority {
			return oaiedge.Invalid(StrictPriorityHeader, "%s must be an integer in [0, %d], got %q", StrictPriorityHeader, MaxStrictPriority, v)
		}
		hints.StrictPriority = &p
	}
	return nil
}

// apply sets the routing request's fields the extension decides:
// priorities, the expected output length, the per-request overlap
// credit, the session it opens or closes and the engine it names. A
// session or engine that contradicts the headers' is refused rather than
// silently preferred.
func (x *NVExt) apply(r *dispatch.Request) error {
	h := &x.AgentHints
	if h.Priority != nil {
		r.Priority = *h.Priority
	}
	if h.StrictPriority != nil {
		r.StrictPriority = int(*h.StrictPriority)
	}
	if h.OSL != nil {
		r.OutputTokens = int(*h.OSL)
	}
	r.OverlapScoreCredit = h.OverlapScoreCredit
	if err := x.applySession(r); err != nil {
		return err
	}
	return x.applyWorker(r)
}

// applySession binds the request to the session it opens (affinity as
// for the session header: the first dispatched request binds it) or ends
// the session after the request when it closes it (as the session-final
// header does).
func (x *NVExt) applySession(r *dispatch.Request) error {
	s := x.SessionControl
	if s == nil {
		return nil
	}
	if r.SessionID != "" && r.SessionID != s.SessionID {
		return oaiedge.Invalid(nvextParam+".session_control.session_id",
			"nvext.session_control.session_id %q differs from the session header's %q", s.SessionID, r.SessionID)
	}
	r.SessionID = s.SessionID
	if s.Action == SessionClose {
		r.SessionFinal = true
	}
	return nil
}

// applyWorker pins the request to the engines the extension names, the
// input of the direct routing mode (any other mode honours them as it
// honours the pin headers): the engine (a disaggregated request's decode
// engine) and the prefill engine.
func (x *NVExt) applyWorker(r *dispatch.Request) error {
	if id, ok := x.Worker(); ok {
		if err := pinOnce(&r.Pin, id, x.DPRank, nvextParam+".backend_instance_id"); err != nil {
			return err
		}
	}
	if x.PrefillWorkerID != nil {
		return pinOnce(&r.PrefillPin, *x.PrefillWorkerID, x.PrefillDPRank, nvextParam+".prefill_worker_id")
	}
	return nil
}

// pinOnce sets *dst to engine id (and rank), refusing, as param, a pin
// the headers set to another.
func pinOnce(dst **dispatch.Pin, id uint64, rank *uint32, param string) error {
	pin := &dispatch.Pin{Engine: routing.WorkerID(id), AnyRank: rank == nil}
	if rank != nil {
		pin.Rank = *rank
	}
	if p := *dst; p != nil && *p != *pin {
		return oaiedge.Invalid(param, "nvext names engine %d, the pin headers another", id)
	}
	*dst = pin
	return nil
}
