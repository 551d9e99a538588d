package frontend

import (
	"net/http"
	"strconv"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

// Pin headers name an exact engine (decimal id) and optionally its rank.
const (
	headerPinEngine = "X-Worker-Instance-Id"
	headerPinRank   = "X-Dp-Rank"
)

// sessionInfo is what the headers say about affinity: the session, read
// by oaiedge as the gateway reads it, and the pin, which only a router
// node honours.
type sessionInfo struct {
	oaiedge.Session
	Pin *dispatch.Pin
}

// readSession extracts the session (from the headers, else from p's body
// fields, by keys) and the pin headers, refusing ids over
// oaiedge.MaxSessionIDBytes and malformed flags or pins.
func readSession(keys oaiedge.SessionKeys, h http.Header, p *oaiedge.Request) (sessionInfo, error) {
	s, err := keys.Read(h, p)
	if err != nil {
		return sessionInfo{}, err
	}
	pin, err := readPin(h)
	return sessionInfo{Session: s, Pin: pin}, err
}

// readPin parses the pin headers; a rank without an engine is refused.
func readPin(h http.Header) (*dispatch.Pin, error) {
	engine, rank := h.Get(headerPinEngine), h.Get(headerPinRank)
	if engine == "" {
		if rank != "" {
			return nil, oaiedge.Invalid(headerPinRank, "%s requires %s", headerPinRank, headerPinEngine)
		}
		return nil, nil
	}
	id, err := strconv.ParseUint(engine, 10, 64)
	if err != nil {
		return nil, oaiedge.Invalid(headerPinEngine, "%s must be a decimal engine id", headerPinEngine)
	}
	pin := &dispatch.Pin{Engine: routing.WorkerID(id), AnyRank: rank == ""}
	if rank != "" {
		r, err := strconv.ParseUint(rank, 10, 32)
		if err != nil {
			return nil, oaiedge.Invalid(headerPinRank, "%s must be a decimal rank", headerPinRank)
		}
		pin.Rank = uint32(r)
	}
	return pin, nil
}
