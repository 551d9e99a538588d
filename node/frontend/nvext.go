package frontend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// ErrNVExt is returned for an nvext object that is not valid; the message
// names the field.
var ErrNVExt = errors.New("invalid nvext")

// Limits of nvext values. Each bounds what a client can make the router
// hold or compute for one request.
const (
	// MaxNVExtBytes bounds the nvext object: it carries a few numbers and
	// ids, never prompt data.
	MaxNVExtBytes = 4 << 10
	// MaxPriority bounds priority and strict_priority, which only order
	// the queue: a bound keeps arithmetic on them exact.
	MaxPriority = 1 << 20
	// MaxOSL bounds the expected output length: no model generates more
	// than its context, 1 Mi tokens.
	MaxOSL = 1 << 20
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
	// external endpoint picker's choice); PrefillWorkerID and
	// DecodeWorkerID are its disaggregated forms, of which kvrouter, which
	// routes aggregated serving, reads DecodeWorkerID as the engine.
	BackendInstanceID *uint64 `json:"backend_instance_id"`
	PrefillWorkerID   *uint64 `json:"prefill_worker_id"`
	DecodeWorkerID    *uint64 `json:"decode_worker_id"`
	DPRank            *uint32 `json:"dp_rank"`
}

// AgentHints are per-request hints of an agent harness.
type AgentHints struct {
	// Priority moves the request ahead in the queue; higher is sooner.
	Priority *int64 `json:"priority"`
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

// ParseNVExt parses and validates the raw "nvext" value of a request body
// (null or absent: the zero NVExt). Errors wrap ErrNVExt and name the
// field; they are the client's fault (400).
func ParseNVExt(raw []byte) (NVExt, error) {
	var x NVExt
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return x, nil
	}
	if len(raw) > MaxNVExtBytes {
		return x, fmt.Errorf("%w: over %d bytes", ErrNVExt, MaxNVExtBytes)
	}
	if err := json.Unmarshal(raw, &x); err != nil {
		return NVExt{}, fmt.Errorf("%w: %v", ErrNVExt, err)
	}
	return x, x.validate()
}

// validate checks every value's range.
func (x *NVExt) validate() error {
	h := &x.AgentHints
	for _, v := range []struct {
		name string
		p    *int64
		max  int64
	}{{"agent_hints.priority", h.Priority, MaxPriority}, {"agent_hints.strict_priority", h.StrictPriority, MaxPriority}, {"agent_hints.osl", h.OSL, MaxOSL}} {
		if v.p != nil && (*v.p < 0 || *v.p > v.max) {
			return fmt.Errorf("%w: %s %d: must be in 0..%d", ErrNVExt, v.name, *v.p, v.max)
		}
	}
	if c := h.OverlapScoreCredit; c != nil && (!(*c >= 0) || math.IsInf(*c, 1)) {
		return fmt.Errorf("%w: agent_hints.overlap_score_credit %v: must be >= 0 and finite", ErrNVExt, *c)
	}
	if s := x.SessionControl; s != nil {
		switch {
		case s.Action != SessionOpen && s.Action != SessionClose:
			return fmt.Errorf("%w: session_control.action %q: want open or close", ErrNVExt, s.Action)
		case s.SessionID == "" || len(s.SessionID) > 256:
			return fmt.Errorf("%w: session_control.session_id: must be 1..256 bytes", ErrNVExt)
		}
	}
	if x.BackendInstanceID != nil && x.DecodeWorkerID != nil && *x.BackendInstanceID != *x.DecodeWorkerID {
		return fmt.Errorf("%w: backend_instance_id and decode_worker_id name different engines", ErrNVExt)
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
