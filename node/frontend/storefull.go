package frontend

import (
	"errors"
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

// storeFullBody is the OpenAI error body of a refusal for a full store in
// class c, naming the cause, and false for any other error.
func storeFullBody(err error, c oaiedge.Class) ([]byte, bool) {
	if !errors.Is(err, dispatch.ErrStoreFull) {
		return nil, false
	}
	return oaiedge.ErrorJSON(&oaiedge.Error{Kind: err, Msg: storeFullMessage}, c), true
}
