package frontend

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// overloadError is the structured 529 body of a policy-class refusal: the
// OpenAI error object plus what the client needs to back off well.
type overloadError struct {
	oaiedge.APIError
	PolicyClass    string `json:"policy_class"`
	Reason         string `json:"reason"`
	Limit          string `json:"limit,omitempty"`
	LimitPerWorker int64  `json:"limit_per_worker,omitempty"`
	Workers        int    `json:"workers,omitempty"`
	EffectiveLimit int64  `json:"effective_limit,omitempty"`
	Pending        int64  `json:"pending,omitempty"`
	WaitedMs       int64  `json:"waited_ms,omitempty"`
	RetryAfterSecs int64  `json:"retry_after_secs"`
}

// writeOverload answers an overload refusal when err is one: the
// Retry-After header on every overload, and the structured body for a
// policy-class refusal. It reports whether it answered.
func writeOverload(w http.ResponseWriter, err error, c oaiedge.Class) bool {
	if !errors.Is(err, dispatch.ErrOverloaded) {
		return false
	}
	secs := int64(math.Ceil(dispatch.DefaultRetryAfter.Seconds()))
	var pe *dispatch.PolicyClassError
	if errors.As(err, &pe) && pe.RetryAfter > 0 {
		secs = int64(math.Ceil(pe.RetryAfter.Seconds()))
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	if pe == nil {
		oaiedge.WriteJSON(w, c.Status, oaiedge.ErrorJSON(err, c))
		return true
	}
	code := "policy_class_queue_limit"
	if pe.Limit == nil {
		code = "policy_class_queue_timeout"
	}
	body := overloadError{APIError: oaiedge.APIError{Message: err.Error(), Type: c.Type, Code: oaiedge.Optional(code)},
		PolicyClass: pe.Class, Reason: pe.Reason(), WaitedMs: pe.Waited.Milliseconds(), RetryAfterSecs: secs}
	if l := pe.Limit; l != nil {
		body.Limit, body.LimitPerWorker, body.Workers, body.EffectiveLimit, body.Pending =
			string(l.Limit), l.PerWorker, l.Workers, l.Effective, l.Pending
	}
	b, _ := json.Marshal(struct {
		Error overloadError `json:"error"`
	}{body})
	oaiedge.WriteJSON(w, c.Status, b)
	return true
}
