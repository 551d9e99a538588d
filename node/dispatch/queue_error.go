package dispatch

import (
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing/queue"
)

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
