package dispatch

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/queue"
)

// Errors of construction and of the session store, beside the Route
// sentinels of types.go.
var (
	// ErrInvalidConfig is returned by Config.Validate and New; the message
	// names the configuration key.
	ErrInvalidConfig = errors.New("dispatch: invalid config")
	// ErrStore wraps an unexpected failure of the session store (Bindings)
	// on the request path; Route returns it only when the store fails.
	ErrStore = errors.New("dispatch: session store failure")
	// ErrStoreFull: the replicated session store refuses writes because a
	// member's disk is below its free-space reserve (503 with
	// Retry-After). Nothing was written; the write succeeds once space
	// returns or a member with room leads. A session store returns it
	// wrapped, and Route keeps it in the chain under ErrStore.
	ErrStoreFull = errors.New("dispatch: the router's store is out of disk space")
)

// policyErrors is the one table that maps the policy package's failure
// classes to Route's sentinels. The first matching row wins.
var policyErrors = []struct {
	cause, as error
}{
	{policy.ErrAllWorkersOverloaded, ErrOverloaded},
	{policy.ErrPinnedWorkerOverloaded, ErrOverloaded},
	{policy.ErrPinnedWorkerNotFound, ErrBadRequest},
	{policy.ErrPinnedRankOutOfRange, ErrBadRequest},
	{policy.ErrNoPinnedWorker, ErrBadRequest},
	{policy.ErrInvalidRequest, ErrBadRequest},
	{policy.ErrNoPrefillWorker, ErrNoEngine},
	{policy.ErrNoCompatibleWorker, ErrNoEngine},
	{policy.ErrSessionStore, ErrStore},
}

// mapPolicyError classifies a pipeline error by Route's sentinels, keeping
// the cause in the chain for logs. An unclassified error (a configuration
// bug) is returned wrapped as it is.
func mapPolicyError(err error) error {
	if errors.Is(err, ErrSessionLimit) {
		return err
	}
	for _, row := range policyErrors {
		if errors.Is(err, row.cause) {
			return fmt.Errorf("%w: %w", row.as, err)
		}
	}
	return fmt.Errorf("dispatch: selecting a worker: %w", err)
}

// checkKey rejects empty and over-long session ids.
func checkKey(key string) error {
	if err := policy.CheckSessionKey(key); err != nil {
		return storeError(err)
	}
	return nil
}

// storeError classifies a session store failure: a refused key or the
// session bound keep their class, anything else is ErrStore.
func storeError(err error) error {
	switch {
	case errors.Is(err, ErrBadRequest) || errors.Is(err, ErrSessionLimit):
		return err
	case errors.Is(err, policy.ErrInvalidRequest):
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return fmt.Errorf("%w: %w", ErrStore, err)
}

// PolicyClassError is a refusal by the admission queue: a class's queue
// limit (Limit set) or its max wait (Waited set). It unwraps to
// ErrOverloaded, so the edge answers 529 with the structured body and
// Retry-After.
type PolicyClassError struct {
	// Class is the physical policy class.
	Class string
	// Limit is the limit reached, nil for a wait past the class's bound.
	Limit *queue.LimitError
	// Waited is how long the request waited before it expired.
	Waited time.Duration
	// RetryAfter is the advice for the client.
	RetryAfter time.Duration
}

func (e *PolicyClassError) Error() string {
	if e.Limit != nil {
		return "dispatch: all engines overloaded: " + e.Limit.Error()
	}
	return fmt.Sprintf("dispatch: all engines overloaded: queued %v in policy class %q, past its max wait", e.Waited.Round(time.Millisecond), e.Class)
}

// Unwrap makes errors.Is(err, ErrOverloaded) true.
func (e *PolicyClassError) Unwrap() error { return ErrOverloaded }

// RetryAdvice is RetryAfter, the client's advice, for the edge's error
// table (oaiedge.RetryAdvisor).
func (e *PolicyClassError) RetryAdvice() time.Duration { return e.RetryAfter }

// Reason is the refusal's reason label: the limit's key or "expired".
func (e *PolicyClassError) Reason() string {
	if e.Limit != nil {
		return string(e.Limit.Limit)
	}
	return "expired"
}
