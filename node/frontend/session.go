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

// pinHeaders are one pin's header names: the reference router's, then
// its compatibility aliases; the first one present is read.
type pinHeaders struct{ engine, rank []string }

var (
	// decodePin names the engine of an aggregated request, or the decode
	// engine of a disaggregated one.
	decodePin = pinHeaders{engine: []string{"X-Dynamo-Worker-Instance-Id", headerPinEngine},
		rank: []string{"X-Dynamo-Dp-Rank", headerPinRank, "X-Data-Parallel-Rank"}}
	// prefillPin names the prefill engine of a disaggregated request.
	prefillPin = pinHeaders{engine: []string{"X-Dynamo-Prefill-Instance-Id", "X-Prefill-Instance-Id"},
		rank: []string{"X-Dynamo-Prefill-Dp-Rank", "X-Prefill-Dp-Rank"}}
)

// unsetRank is the rank header value that the reference router reads as
// no rank (u32::MAX), which its gateways send for an engine without one.
const unsetRank = "4294967295"

// sessionInfo is what the headers say about affinity: the session, read
// by oaiedge as the gateway reads it, and the pin, which only a router
// node honours.
type sessionInfo struct {
	oaiedge.Session
	Pin, PrefillPin *dispatch.Pin
}

// readSession extracts the session (from the headers, else from p's body
// fields, by keys) and the pin headers, refusing ids over
// oaiedge.MaxSessionIDBytes and malformed flags or pins.
func readSession(keys oaiedge.SessionKeys, h http.Header, p *oaiedge.Request) (sessionInfo, error) {
	s, err := keys.Read(h, p)
	if err != nil {
		return sessionInfo{}, err
	}
	si := sessionInfo{Session: s}
	if si.Pin, err = readPin(h, decodePin); err != nil {
		return sessionInfo{}, err
	}
	si.PrefillPin, err = readPin(h, prefillPin)
	return si, err
}

// readPin parses one pin's headers; a rank without an engine is refused.
func readPin(h http.Header, names pinHeaders) (*dispatch.Pin, error) {
	en, engine := oaiedge.FirstHeader(h, names.engine)
	rn, rank := oaiedge.FirstHeader(h, names.rank)
	if rank == unsetRank {
		rank = ""
	}
	if engine == "" {
		if rank != "" {
			return nil, oaiedge.Invalid(rn, "%s requires %s", rn, names.engine[0])
		}
		return nil, nil
	}
	id, err := strconv.ParseUint(engine, 10, 64)
	if err != nil {
		return nil, oaiedge.Invalid(en, "%s must be a decimal engine id", en)
	}
	pin := &dispatch.Pin{Engine: routing.WorkerID(id), AnyRank: rank == ""}
	if rank != "" {
		r, err := strconv.ParseUint(rank, 10, 32)
		if err != nil {
			return nil, oaiedge.Invalid(rn, "%s must be a decimal rank", rn)
		}
		pin.Rank = uint32(r)
	}
	return pin, nil
}
