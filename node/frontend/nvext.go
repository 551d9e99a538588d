package frontend

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// Limits of nvext values. Each bounds what a client can make the router
// hold or compute for one request.
const (
	// MaxNVExtBytes bounds the nvext object: it carries a few numbers and
	// ids, never prompt data.
	MaxNVExtBytes = 4 << 10
	// MaxStrictPriority bounds strict_priority, which only names a queue
	// tier: a bound keeps the tiers' arithmetic exact.
	MaxStrictPriority = 1 << 20
	// MaxOSL bounds the expected output length: no model generates more
	// than its context, 1 Mi tokens.
	MaxOSL = 1 << 20
	// maxNVExtSessionIDBytes is the session id bound of the session
	// headers (oaiedge.MaxSessionIDBytes), so that a session opened in
	// the body can be named in a header too.
	maxNVExtSessionIDBytes = oaiedge.MaxSessionIDBytes
)

// Session control actions.
const (
	SessionOpen  = "open"
	SessionClose = "close"
)

// NVExt is the reference router's request extension (the body's "nvext"
// object) as the router reads it: agent hints, session control and worker
// ids for the direct policy. Absent fields are nil. Fields the router
// does not read are ignored, so that clients written for newer versions
// keep working.
type NVExt struct {
	AgentHints     AgentHints      `json:"agent_hints"`
	SessionControl *SessionControl `json:"session_control"`
	// BackendInstanceID names the engine for the direct policy (an
	// external endpoint picker's choice); DecodeWorkerID is the same for
	// the decode engine of a disaggregated request, and PrefillWorkerID
	// (with PrefillDPRank) its prefill engine, as the prefill pin headers
	// name it.
	BackendInstanceID *uint64 `json:"backend_instance_id"`
	PrefillWorkerID   *uint64 `json:"prefill_worker_id"`
	DecodeWorkerID    *uint64 `json:"decode_worker_id"`
	DPRank            *uint32 `json:"dp_rank"`
	PrefillDPRank     *uint32 `json:"prefill_dp_rank"`
}

// AgentHints are per-request hints of an agent harness.
type AgentHints struct {
	// Priority moves the request ahead in the queue; higher is sooner. It
	// is a number in [0, dispatch.MaxPriority]: seconds of arrival credit
	// under fcfs, a weight under wspt.
	Priority *float64 `json:"priority"`
	// StrictPriority is the queue tier; a higher tier always goes first.
	StrictPriority *int64 `json:"strict_priority"`
	// OSL is the expected output length in tokens.
	OSL *int64 `json:"osl"`
	// OverlapScoreCredit replaces the KV cost model's device credit for
	// this request.
	OverlapScoreCredit *float64 `json:"overlap_score_credit"`
}

// SessionControl opens or closes a session explicitly.
type SessionControl struct {
	SessionID string `json:"session_id"`
	Action    string `json:"action"`
}

// nvextParam prefixes the parameter names of refusals.
const nvextParam = "nvext"

// ParseNVExt parses and validates the raw "nvext" value of a request body
// (null or absent: the zero NVExt). A refusal is an oaiedge invalid
// error naming the field ("nvext.agent_hints.priority"): the client's
// fault, a 400.
func ParseNVExt(raw []byte) (NVExt, error) {
	var x NVExt
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return x, nil
	}
	if len(raw) > MaxNVExtBytes {
		return x, oaiedge.Invalid(nvextParam, "nvext is over %d bytes", MaxNVExtBytes)
	}
	if err := json.Unmarshal(raw, &x); err != nil {
		return NVExt{}, oaiedge.Invalid(nvextParam, "nvext is malformed: %v", err)
	}
	return x, x.validate()
}

// validate checks every value's range.
func (x *NVExt) validate() error {
	if err := x.AgentHints.validate(); err != nil {
		return err
	}
	if err := x.SessionControl.validate(); err != nil {
		return err
	}
	if x.BackendInstanceID != nil && x.DecodeWorkerID != nil && *x.BackendInstanceID != *x.DecodeWorkerID {
		return oaiedge.Invalid(nvextParam+".decode_worker_id", "nvext.backend_instance_id and nvext.decode_worker_id name different engines")
	}
	if _, ok := x.Worker(); x.DPRank != nil && !ok {
		return oaiedge.Invalid(nvextParam+".dp_rank", "nvext.dp_rank requires nvext.backend_instance_id or nvext.decode_worker_id")
	}
	if x.PrefillDPRank != nil && x.PrefillWorkerID == nil {
		return oaiedge.Invalid(nvextParam+".prefill_dp_rank", "nvext.prefill_dp_rank requires nvext.prefill_worker_id")
	}
	return nil
}

// validate checks the hints' ranges.
func (h *AgentHints) validate() error {
	const pre = nvextParam + ".agent_hints."
	if p := h.Priority; p != nil && (!(*p >= 0) || *p > dispatch.MaxPriority) {
		return oaiedge.Invalid(pre+"priority", "%spriority must be in [0, %d], got %v", pre, dispatch.MaxPriority, *p)
	}
	for _, v := range []struct {
		name string
		p    *int64
		max  int64
	}{{"strict_priority", h.StrictPriority, MaxStrictPriority}, {"osl", h.OSL, MaxOSL}} {
		if v.p != nil && (*v.p < 0 || *v.p > v.max) {
			return oaiedge.Invalid(pre+v.name, "%s%s must be in [0, %d], got %d", pre, v.name, v.max, *v.p)
		}
	}
	if c := h.OverlapScoreCredit; c != nil && (!(*c >= 0) || math.IsInf(*c, 1)) {
		return oaiedge.Invalid(pre+"overlap_score_credit", "%soverlap_score_credit must be >= 0 and finite, got %v", pre, *c)
	}
	return nil
}

// validate checks the action and the session id; nil is valid.
func (s *SessionControl) validate() error {
	const pre = nvextParam + ".session_control."
	switch {
	case s == nil:
		return nil
	case s.Action != SessionOpen && s.Action != SessionClose:
		return oaiedge.Invalid(pre+"action", "%saction must be open or close, got %q", pre, s.Action)
	case s.SessionID == "" || len(s.SessionID) > maxNVExtSessionIDBytes:
		return oaiedge.Invalid(pre+"session_id", "%ssession_id must be 1..%d bytes", pre, maxNVExtSessionIDBytes)
	}
	return nil
}

// Worker is the engine the direct policy should use, if the extension
// names one.
func (x *NVExt) Worker() (uint64, bool) {
	switch {
	case x.BackendInstanceID != nil:
		return *x.BackendInstanceID, true
	case x.DecodeWorkerID != nil:
		return *x.DecodeWorkerID, true
	}
	return 0, false
}
