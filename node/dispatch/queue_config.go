package dispatch

import (
	"time"

	"github.com/kvrouter/kvrouter/routing/policyclass"
)

// Defaults of QueueConfig.
const (
	// DefaultQueuePoll is how often a queued request re-checks for free
	// capacity when nothing this node did freed any: load reported by
	// engines (other routers' requests) changes without telling us. 25 ms
	// is well under a prefill, and costs one candidate scan per model.
	DefaultQueuePoll = 25 * time.Millisecond
	// DefaultRetryAfter is the Retry-After advice of a queue refusal: about
	// one prefill's time, after which a busy fleet may have room.
	DefaultRetryAfter = time.Second
)

// QueueConfig configures the admission queue (see queue.go). The queue is
// off unless Policy is set, as in the reference.
type QueueConfig struct {
	// Policy is the policy-class configuration (router_policy_config and
	// the router_queue_* keys); nil turns the queue off.
	Policy *policyclass.Config
	// Poll is how often a waiting request re-checks for capacity (default
	// DefaultQueuePoll).
	Poll time.Duration
	// RetryAfter is the advice sent with a refusal (default
	// DefaultRetryAfter).
	RetryAfter time.Duration
}

// withDefaults fills the zero durations.
func (c QueueConfig) withDefaults() QueueConfig {
	if c.Poll <= 0 {
		c.Poll = DefaultQueuePoll
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	return c
}
