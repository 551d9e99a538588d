package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/node/frontend"
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

// registerAdmission registers when an engine counts as busy and what
// happens to a request while every engine is: an overload answer, or a
// wait in the admission queue.
func (f *nodeFlags) registerAdmission(fs *pflag.FlagSet) {
	fs.Float64Var(&f.decodeFrac, "active-decode-blocks-threshold", -1, "busy above this share of KV blocks in decode")
	fs.Int64Var(&f.prefillAbs, "active-prefill-tokens-threshold", -1, "busy above this many active prefill tokens")
	fs.Float64Var(&f.prefillFrac, "active-prefill-tokens-threshold-frac", -1, "busy above N * max_num_batched_tokens\n"+
		"Counted in active prefill tokens, against each engine's max_num_batched_tokens.")
	fs.IntVar(&f.cfg.Frontend.OverloadStatus, "overload-status", frontend.OverloadStatus, "HTTP status when every engine is busy")
	q := &f.queue
	fs.Float64Var(&q.threshold, "router-queue-threshold", -1, "queue requests above N * max_num_batched_tokens\n"+
		"Enables the admission queue: a request waits while every eligible engine's active prefill tokens exceed "+
		"this multiple of its max_num_batched_tokens.")
	fs.StringVar(&q.order, "router-queue-policy", "fcfs", "queue order: fcfs (tail TTFT), wspt (mean TTFT)\n"+
		"fcfs: a priority moves the arrival earlier. wspt: (1+priority)/uncached tokens.")
	fs.StringVar(&q.policyFile, "router-policy-config", "", "YAML file of policy classes; enables the queue\n"+
		"Profiles, families, classes and worker_selection; see docs/queueing.md.")
	fs.DurationVar(&q.maxWait, "router-queue-max-wait", 0, "longest wait in the queue, then 529 (0: no limit)\n"+
		"For requests whose class sets no max_queue_wait_secs.")
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
