package frontend

import (
	"net/http"
	"strconv"

	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

// Session headers, canonical first. For each field the first header
// present wins, so a client sending both the canonical header and an
// agent-native one is routed by the canonical one.
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

// Pin headers name an exact engine (decimal id) and optionally its rank.
const (
	headerPinEngine = "X-Worker-Instance-Id"
	headerPinRank   = "X-Dp-Rank"
)

// sessionInfo is what the headers say about affinity.
type sessionInfo struct {
	ID, Parent string
	Final      bool
	Pin        *dispatch.Pin
}

// readSession extracts session and pin headers, refusing ids over
// MaxSessionIDBytes and malformed flags or pins.
func readSession(h http.Header) (sessionInfo, error) {
	var si sessionInfo
	idHeader, id := first(h, sessionHeaders)
	parentHeader, parent := first(h, parentHeaders)
	if parent == "" && idHeader == "X-Claude-Code-Agent-Id" {
		parentHeader, parent = "X-Claude-Code-Session-Id", h.Get("X-Claude-Code-Session-Id")
	}
	for _, v := range [][2]string{{idHeader, id}, {parentHeader, parent}} {
		if len(v[1]) > MaxSessionIDBytes {
			return si, badParam(v[0], "%s exceeds %d bytes", v[0], MaxSessionIDBytes)
		}
	}
	si.ID, si.Parent = id, parent
	if name, v := first(h, finalHeaders); v != "" {
		final, err := strconv.ParseBool(v)
		if err != nil {
			return si, badParam(name, "%s must be true or false", name)
		}
		si.Final = final
	}
	pin, err := readPin(h)
	si.Pin = pin
	return si, err
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

// readPin parses the pin headers; a rank without an engine is refused.
func readPin(h http.Header) (*dispatch.Pin, error) {
	engine, rank := h.Get(headerPinEngine), h.Get(headerPinRank)
	if engine == "" {
		if rank != "" {
			return nil, badParam(headerPinRank, "%s requires %s", headerPinRank, headerPinEngine)
		}
		return nil, nil
	}
	id, err := strconv.ParseUint(engine, 10, 64)
	if err != nil {
		return nil, badParam(headerPinEngine, "%s must be a decimal engine id", headerPinEngine)
	}
	pin := &dispatch.Pin{Engine: routing.WorkerID(id), AnyRank: rank == ""}
	if rank != "" {
		r, err := strconv.ParseUint(rank, 10, 32)
		if err != nil {
			return nil, badParam(headerPinRank, "%s must be a decimal rank", headerPinRank)
		}
		pin.Rank = uint32(r)
	}
	return pin, nil
}
