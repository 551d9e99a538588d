package oaiedge

import (
	"net/http"
	"strconv"
)

// MaxSessionIDBytes caps session ids from the headers: the session
// store's bound, so that an id the store would refuse is refused with a
// 400 naming the header, at whichever edge sees it first.
const MaxSessionIDBytes = 256

// Session headers, canonical first. For each field the first header
// present wins, so a client sending both the canonical header and an
// agent-native one is routed by the canonical one. The gateway homes a
// session by the key these give and the router node binds it by the same
// key, so both read them here, and only here.
var (
	// sessionHeaders name the session id: the canonical X-Session-ID (which
	// is also OpenCode's x-session-id, headers being case-insensitive),
	// Dynamo's, then Claude Code's agent and session ids (a subagent's own
	// agent id names its conversation) and Codex's thread id.
	sessionHeaders = []string{"X-Session-Id", "X-Dynamo-Session-Id", "X-Claude-Code-Agent-Id",
		"X-Claude-Code-Session-Id", "Thread-Id"}
	// parentHeaders name the parent session (the group a subagent belongs
	// to). When a Claude Code agent id is the session, its session id is the
	// parent unless a parent agent id is given.
	parentHeaders = []string{"X-Parent-Session-Id", "X-Dynamo-Parent-Session-Id",
		"X-Claude-Code-Parent-Agent-Id", "X-Codex-Parent-Thread-Id"}
	// finalHeaders end the session after the request.
	finalHeaders = []string{"X-Session-Final", "X-Dynamo-Session-Final"}
)

// Session is what a request's headers say about its session.
type Session struct {
	// ID is the session id and Parent its parent group, "" when absent.
	ID, Parent string
	// Final ends the session after the request.
	Final bool
}

// Key is the session's binding key: the parent group when there is one,
// else the session id; "" without a session.
func (s Session) Key() string {
	if s.Parent != "" {
		return s.Parent
	}
	return s.ID
}

// ReadSession reads the session headers, refusing ids over
// MaxSessionIDBytes and a final flag that is not a boolean, naming the
// header.
func ReadSession(h http.Header) (Session, error) {
	var s Session
	idHeader, id := first(h, sessionHeaders)
	parentHeader, parent := first(h, parentHeaders)
	if parent == "" && idHeader == "X-Claude-Code-Agent-Id" {
		parentHeader, parent = "X-Claude-Code-Session-Id", h.Get("X-Claude-Code-Session-Id")
	}
	for _, v := range [][2]string{{idHeader, id}, {parentHeader, parent}} {
		if len(v[1]) > MaxSessionIDBytes {
			return s, Invalid(v[0], "%s exceeds %d bytes", v[0], MaxSessionIDBytes)
		}
	}
	s.ID, s.Parent = id, parent
	if name, v := first(h, finalHeaders); v != "" {
		final, err := strconv.ParseBool(v)
		if err != nil {
			return s, Invalid(name, "%s must be true or false", name)
		}
		s.Final = final
	}
	return s, nil
}

// first returns the first of names present with a non-empty value.
func first(h http.Header, names []string) (string, string) {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// SessionIDParam checks a session id named in a path (GET or DELETE
// /v1/sessions/{id}): 1 to MaxSessionIDBytes bytes, else a refusal naming
// "id".
func SessionIDParam(id string) error {
	if id == "" || len(id) > MaxSessionIDBytes {
		return Invalid("id", "session id must be 1 to %d bytes", MaxSessionIDBytes)
	}
	return nil
}
