package gateway

import (
	"net/http"
	"slices"

	"github.com/zeebo/xxh3"
)

// Session headers, in the router node's order of precedence
// (node/frontend/session.go): the first one present names the session
// or its parent group. They must stay in step with the node's, so that
// the gateway places a session by the same key the node binds.
var (
	sessionHeaders = []string{"X-Session-Id", "X-Dynamo-Session-Id", "X-Claude-Code-Agent-Id",
		"X-Claude-Code-Session-Id", "Thread-Id"}
	parentHeaders = []string{"X-Parent-Session-Id", "X-Dynamo-Parent-Session-Id",
		"X-Claude-Code-Parent-Agent-Id", "X-Codex-Parent-Thread-Id"}
)

// sessionKey returns the binding key of a request, as the node's
// dispatcher computes it: the parent session when there is one, else the
// session id; "" without a session. Ids over MaxSessionIDBytes are
// refused.
func sessionKey(h http.Header) (string, error) {
	idHeader, id := firstHeader(h, sessionHeaders)
	parentHeader, parent := firstHeader(h, parentHeaders)
	if parent == "" && idHeader == "X-Claude-Code-Agent-Id" {
		parentHeader, parent = "X-Claude-Code-Session-Id", h.Get("X-Claude-Code-Session-Id")
	}
	for _, v := range [][2]string{{idHeader, id}, {parentHeader, parent}} {
		if len(v[1]) > MaxSessionIDBytes {
			return "", badParam(v[0], "%s exceeds %d bytes", v[0], MaxSessionIDBytes)
		}
	}
	if parent != "" {
		return parent, nil
	}
	return id, nil
}

// firstHeader returns the first of names present with a non-empty value.
func firstHeader(h http.Header, names []string) (string, string) {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// Homes ranks the DCs of a federation for each session by rendezvous
// (highest random weight) hashing: every gateway given the same DC names
// computes the same ranking without coordination, and adding or removing
// a DC moves only the sessions whose first choice it is or was. The first
// DC of a session's ranking is its home. Homes is immutable.
type Homes struct {
	dcs []string
}

// NewHomes returns the ranking over dcs (order and duplicates do not
// matter).
func NewHomes(dcs ...string) Homes {
	s := slices.Clone(dcs)
	slices.Sort(s)
	return Homes{dcs: slices.Compact(s)}
}

// Home returns the session's home DC ("" when there are no DCs).
func (h Homes) Home(session string) string {
	best, bestScore := "", uint64(0)
	for _, dc := range h.dcs {
		if s := score(dc, session); best == "" || s > bestScore {
			best, bestScore = dc, s
		}
	}
	return best
}

// Prefer returns whichever of a and b ranks first for session: the rule
// that settles a session bound in two DCs.
func (h Homes) Prefer(session, a, b string) string {
	sa, sb := score(a, session), score(b, session)
	if sa > sb || sa == sb && a < b {
		return a
	}
	return b
}

// score is a DC's rendezvous weight for a session.
func score(dc, session string) uint64 {
	return xxh3.HashStringSeed(session, xxh3.HashString(dc))
}
