package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/routing/policyclass"
	"github.com/kvrouter/kvrouter/routing/queue"
)

// queueFlags are the admission queue's and the operator API's options.
type queueFlags struct {
	threshold  float64
	order      string
	policyFile string
	maxWait    time.Duration
}

// registerQueue registers the queue and operator flags.
func (f *nodeFlags) registerQueue(fs *pflag.FlagSet) {
	q := &f.queue
	fs.Float64Var(&q.threshold, "router-queue-threshold", -1, "enable the admission queue: requests wait while every eligible engine's active prefill tokens exceed this multiple of its max_num_batched_tokens (negative: no queue, the default)")
	fs.StringVar(&q.order, "router-queue-policy", "fcfs", "order of the admission queue: fcfs (priority moves arrival earlier; tail TTFT) or wspt ((1+priority)/uncached tokens; mean TTFT)")
	fs.StringVar(&q.policyFile, "router-policy-config", "", "YAML policy-class configuration (profiles, families, classes, worker_selection); enables the queue; see docs/queueing.md")
	fs.DurationVar(&q.maxWait, "router-queue-max-wait", 0, "longest a request waits in the queue when its class sets no max_queue_wait_secs, then 529 (0: until the client gives up)")
}

// resolveQueue loads the policy configuration when the queue is on; an
// error names the file, YAML path and key, and the node does not start.
func (f *nodeFlags) resolveQueue() error {
	q := &f.queue
	order, err := queue.ParseOrder(q.order)
	if err != nil {
		return fmt.Errorf("--router-queue-policy: %w", err)
	}
	if q.threshold < 0 && q.policyFile == "" {
		return nil
	}
	d := policyclass.Defaults{Order: order, MaxWait: q.maxWait}
	if q.threshold >= 0 {
		d.ThresholdFrac = &q.threshold
	}
	pc, err := policyclass.Load(q.policyFile, d)
	if err != nil {
		return fmt.Errorf("--router-policy-config: %w", err)
	}
	f.cfg.Dispatch.Queue.Policy = pc
	return nil
}
