package oaiedge

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
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
	// DefaultSessionHeaders name the session id: the canonical
	// X-Session-ID (which is also OpenCode's x-session-id, headers being
	// case-insensitive), Dynamo's, llm-d's x-session-token, SGLang's
	// router's x-smg-routing-key, then Claude Code's agent and session
	// ids (a subagent's own agent id names its conversation) and Codex's
	// thread id.
	DefaultSessionHeaders = []string{"X-Session-Id", "X-Dynamo-Session-Id", "X-Session-Token", "X-Smg-Routing-Key",
		"X-Claude-Code-Agent-Id", "X-Claude-Code-Session-Id", "Thread-Id"}
	// DefaultSessionBodyFields name the body fields that give a session id
	// when no header does: OpenAI's prompt_cache_key (its own hint for
	// requests sharing a prefix), then user.
	DefaultSessionBodyFields = []string{"prompt_cache_key", "user"}
	// parentHeaders name the parent session (the group a subagent belongs
	// to). When a Claude Code agent id is the session, its session id is the
	// parent unless a parent agent id is given.
	parentHeaders = []string{"X-Parent-Session-Id", "X-Dynamo-Parent-Session-Id",
		"X-Claude-Code-Parent-Agent-Id", "X-Codex-Parent-Thread-Id"}
	// finalHeaders end the session after the request.
	finalHeaders = []string{"X-Session-Final", "X-Dynamo-Session-Final"}
)

// ErrSessionKeys reports an invalid SessionKeys.
var ErrSessionKeys = errors.New("oaiedge: invalid session keys")

// SessionKeys says where a request's session id comes from: the first of
// Headers present, else the first of BodyFields set. Both edges of a
// deployment must be given the same keys, since the gateway homes a
// session by the key the node binds it by.
type SessionKeys struct {
	// Headers name the session id; nil means DefaultSessionHeaders.
	Headers []string
	// BodyFields are "prompt_cache_key" and "user" in the order tried;
	// nil means DefaultSessionBodyFields and an empty list none.
	BodyFields []string
}

// Validate checks the header names and body fields and returns the keys
// with defaults applied and header names canonical.
func (k SessionKeys) Validate() (SessionKeys, error) {
	out := SessionKeys{Headers: DefaultSessionHeaders, BodyFields: DefaultSessionBodyFields}
	if k.Headers != nil {
		out.Headers = make([]string, 0, len(k.Headers))
		for _, h := range k.Headers {
			if !validHeaderName(h) {
				return k, fmt.Errorf("%w: session header %q is not a header name", ErrSessionKeys, h)
			}
			out.Headers = append(out.Headers, http.CanonicalHeaderKey(h))
		}
	}
	if k.BodyFields != nil {
		for _, f := range k.BodyFields {
			if !slices.Contains(DefaultSessionBodyFields, f) {
				return k, fmt.Errorf("%w: session body field %q is not one of %s", ErrSessionKeys, f,
					strings.Join(DefaultSessionBodyFields, ", "))
			}
		}
		out.BodyFields = k.BodyFields
	}
	return out, nil
}

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

// Read reads a request's session: the id from the headers, else from
// req's body fields (req may be nil: headers only), the parent and the
// final flag from their headers. It refuses ids over MaxSessionIDBytes
// and a final flag that is not a boolean, naming the header or field.
// k must have been through Validate (nil lists read as the defaults).
func (k SessionKeys) Read(h http.Header, req *Request) (Session, error) {
	var s Session
	headers := k.Headers
	if headers == nil {
		headers = DefaultSessionHeaders
	}
	idHeader, id := FirstHeader(h, headers)
	if id == "" && req != nil {
		idHeader, id = k.bodyID(req)
	}
	parentHeader, parent := FirstHeader(h, parentHeaders)
	if parent == "" && idHeader == "X-Claude-Code-Agent-Id" {
		parentHeader, parent = "X-Claude-Code-Session-Id", h.Get("X-Claude-Code-Session-Id")
	}
	for _, v := range [][2]string{{idHeader, id}, {parentHeader, parent}} {
		if len(v[1]) > MaxSessionIDBytes {
			return s, Invalid(v[0], "%s exceeds %d bytes", v[0], MaxSessionIDBytes)
		}
	}
	s.ID, s.Parent = id, parent
	if name, v := FirstHeader(h, finalHeaders); v != "" {
		final, err := strconv.ParseBool(v)
		if err != nil {
			return s, Invalid(name, "%s must be true or false", name)
		}
		s.Final = final
	}
	return s, nil
}

// bodyID returns the first of the body fields set, and its name.
func (k SessionKeys) bodyID(req *Request) (string, string) {
	fields := k.BodyFields
	if fields == nil {
		fields = DefaultSessionBodyFields
	}
	for _, f := range fields {
		v := req.User
		if f == "prompt_cache_key" {
			v = req.PromptCacheKey
		}
		if v != "" {
			return f, v
		}
	}
	return "", ""
}

// FirstHeader returns the first of names present in h with a non-empty
// value, and the value; two empty strings when there is none.
func FirstHeader(h http.Header, names []string) (string, string) {
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

// validHeaderName reports an RFC 9110 field name: one or more token
// characters.
func validHeaderName(s string) bool {
	return s != "" && Visible(s) && !strings.ContainsAny(s, `"(),/:;<=>?@[\]{}`)
}
