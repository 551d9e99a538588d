package dispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/policyclass"
	"github.com/kvrouter/kvrouter/routing/queue"
)

// queued builds a one-engine fixture whose queue threshold is 0: the
// engine is busy while any prefill is active. yaml, when set, is the
// policy file.
func queued(t *testing.T, yaml string) *fixture {
	t.Helper()
	zero := 0.0
	pc, err := policyclass.Parse([]byte(yaml), policyclass.Defaults{ThresholdFrac: &zero})
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, 1, func(c *Config) { c.Queue = QueueConfig{Policy: pc, Poll: time.Millisecond} })
}

// routeAsync routes r in a goroutine.
func (f *fixture) routeAsync(ctx context.Context, r *Request) <-chan result {
	out := make(chan result, 1)
	go func() {
		dec, err := f.d.Route(ctx, r)
		out <- result{dec, err}
	}()
	return out
}

type result struct {
	dec *Decision
	err error
}

// waitQueued waits until the model's queue holds n requests.
func (f *fixture) waitQueued(n int) {
	f.t.Helper()
	waittest.Until(f.t, 10*time.Second, fmt.Sprintf("the queue holds %d requests", n), func() bool {
		mq := f.d.queues.get("m")
		if mq == nil {
			return false
		}
		mq.mu.Lock()
		defer mq.mu.Unlock()
		return mq.q.Len() == n
	})
}

func TestQueueHoldsUntilCapacityFrees(t *testing.T) {
	f := queued(t, "")
	first := f.route(f.req(prompt(1, 64)))
	waiting := f.routeAsync(t0ctx, f.req(prompt(500, 64)))
	f.waitQueued(1)
	// The waiting request re-checks for capacity every Poll (1 ms here):
	// 20 polls without a route, then a route once capacity frees.
	select {
	case r := <-waiting:
		t.Fatalf("routed while the only engine was busy: %v", r.err)
	case <-time.After(20 * f.d.queues.cfg.Poll):
	}
	first.OnFirstToken()
	r := <-waiting
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.dec.Done(nil)
	first.Done(nil)
	f.waitQueued(0)
}

func TestQueueCancellationRemovesAtOnce(t *testing.T) {
	f := queued(t, "")
	first := f.route(f.req(prompt(1, 64)))
	defer first.Done(nil)
	ctx, cancel := context.WithCancel(t0ctx)
	waiting := f.routeAsync(ctx, f.req(prompt(500, 64)))
	f.waitQueued(1)
	cancel()
	if r := <-waiting; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", r.err)
	}
	f.waitQueued(0)
}

func TestQueueLimitRefusesWithClass(t *testing.T) {
	f := queued(t, "classes: {std: {request_queue_limit_per_worker: 1}}")
	first := f.route(f.req(prompt(1, 64)))
	defer first.Done(nil)
	ctx, cancel := context.WithCancel(t0ctx)
	defer cancel()
	waiting := f.routeAsync(ctx, f.req(prompt(500, 64)))
	f.waitQueued(1)
	_, err := f.d.Route(t0ctx, f.req(prompt(900, 64)))
	var pe *PolicyClassError
	if !errors.As(err, &pe) || !errors.Is(err, ErrOverloaded) || pe.Limit == nil ||
		pe.Limit.Limit != queue.LimitRequests || pe.Class != "std" || pe.Limit.Effective != 1 || pe.RetryAfter <= 0 {
		t.Fatalf("got %v, want a request-limit refusal of class std", err)
	}
	cancel()
	<-waiting
}

func TestQueueMaxWait(t *testing.T) {
	tests := []struct {
		name   string
		remove bool
		want   error
	}{
		{"engines busy: 529", false, ErrOverloaded},
		{"no engine left: 503", true, ErrNoEngine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := queued(t, "classes: {std: {max_queue_wait_secs: 0.05}}")
			first := f.route(f.req(prompt(1, 64)))
			defer first.Done(nil)
			if tc.remove {
				f.engines.remove(1)
			}
			_, err := f.d.Route(t0ctx, f.req(prompt(500, 64)))
			if tc.remove && errors.Is(err, ErrNoEngine) {
				return // refused before queueing: no candidate at all
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestQueueBadPriority(t *testing.T) {
	f := queued(t, "")
	r := f.req(prompt(1, 64))
	r.Priority = -1
	if _, err := f.d.Route(t0ctx, r); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("got %v, want ErrBadRequest", err)
	}
}

func TestRuntimeThresholds(t *testing.T) {
	f := newFixture(t, 1, nil)
	zero := int64(0)
	first := f.route(f.req(prompt(1, 64)))
	defer first.Done(nil)
	if err := f.d.SetThresholds("m", &policy.Thresholds{ActivePrefillTokens: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.Route(t0ctx, f.req(prompt(500, 64))); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("got %v, want ErrOverloaded under the runtime threshold", err)
	}
	if th, set := f.d.Thresholds("m"); !set || *th.ActivePrefillTokens != 0 {
		t.Fatalf("thresholds %+v set %v", th, set)
	}
	_ = f.d.SetThresholds("m", nil)
	f.route(f.req(prompt(900, 64))).Done(nil)
}

// TestQueueConcurrentBurstDrains routes a burst from many goroutines
// through a queue over one engine; each request ends soon after it is
// routed. Every request must be routed and the queue must end empty.
func TestQueueConcurrentBurstDrains(t *testing.T) {
	f := queued(t, "")
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		r := f.req(prompt(uint32(1000*i), 64))
		go func() {
			dec, err := f.d.Route(t0ctx, r)
			if err == nil {
				time.Sleep(time.Millisecond)
				dec.OnFirstToken()
				dec.Done(nil)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	f.waitQueued(0)
	if l := f.active(w1(1)); l.PrefillTokens != 0 || l.ActiveRequests != 0 {
		t.Fatalf("load left booked: %+v", l)
	}
}

func TestQueueUnknownPolicyClassIsRefused(t *testing.T) {
	f := queued(t, "default_policy_family: std\nfamilies: {std: {class: std}, premium: {class: premium}}\nclasses: {std: {}, premium: {}}")
	tests := []struct {
		name, class string
		want        error
	}{
		{"no header: default class", "", nil},
		{"known class", "premium", nil},
		{"unknown class", "premium-typo", ErrBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.req(prompt(1, 64))
			r.PolicyClass = tc.class
			dec, err := f.d.Route(t0ctx, r)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err == nil {
				dec.Done(nil)
			}
		})
	}
}
