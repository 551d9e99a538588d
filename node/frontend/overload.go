package frontend

import (
	"encoding/json"
	"errors"

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

// overloadBody is the structured body of a policy-class refusal in class
// c, and false for any other error. Its retry_after_secs is the
// Retry-After that c.Answer sets with it.
func overloadBody(err error, c oaiedge.Class) ([]byte, bool) {
	var pe *dispatch.PolicyClassError
	if !errors.As(err, &pe) {
		return nil, false
	}
	code := "policy_class_queue_limit"
	if pe.Limit == nil {
		code = "policy_class_queue_timeout"
	}
	body := overloadError{APIError: oaiedge.APIError{Message: err.Error(), Type: c.Type, Code: oaiedge.Optional(code)},
		PolicyClass: pe.Class, Reason: pe.Reason(), WaitedMs: pe.Waited.Milliseconds(), RetryAfterSecs: c.RetrySeconds(err)}
	if l := pe.Limit; l != nil {
		body.Limit, body.LimitPerWorker, body.Workers, body.EffectiveLimit, body.Pending =
			string(l.Limit), l.PerWorker, l.Workers, l.Effective, l.Pending
	}
	b, _ := json.Marshal(struct {
		Error overloadError `json:"error"`
	}{body})
	return b, true
}
