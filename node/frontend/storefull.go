package frontend

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// storeFullRetryAfter is the Retry-After advice of a refusal for a full
// disk: long enough for a full leader to hand its leadership to a member
// with room (a few heartbeats) or for an operator's alert to fire, short
// enough that a client does not give up on a router that recovers.
const storeFullRetryAfter = 5 * time.Second

// storeFullMessage names the cause for the client, without the error
// chain: the store's paths and figures are for the operator's log.
const storeFullMessage = "the router's store is out of disk space; the request was not served, retry later"

// writeStoreFull answers a refusal for a full store when err is one: 503
// with Retry-After and an OpenAI error body naming the cause. It reports
// whether it answered.
func writeStoreFull(w http.ResponseWriter, err error, c oaiedge.Class) bool {
	if !errors.Is(err, dispatch.ErrStoreFull) {
		return false
	}
	w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(storeFullRetryAfter.Seconds())), 10))
	oaiedge.WriteJSON(w, c.Status, oaiedge.ErrorJSON(&oaiedge.Error{Kind: err, Msg: storeFullMessage}, c))
	return true
}
