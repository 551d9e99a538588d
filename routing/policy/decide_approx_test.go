package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// TestApproxLRUChangesTheDecision replays one history under both
// approximate cache policies. Engine 1 (capacity 5 blocks) serves prompt P
// (4 blocks), then prompt Q (4 blocks) while a one-block request R is
// still running on it. TTL remembers both prompts; LRU keeps R's block
// (referenced), evicts P (released first, least recently used) and keeps
// Q. When P comes back unpinned, TTL sends it to engine 1 for its cache,
// LRU to the idle engine 2, and records the prediction there.
func TestApproxLRUChangesTheDecision(t *testing.T) {
	p, q, r := prompt(1, 4), prompt(2, 4), prompt(3, 1)
	for _, tc := range []struct {
		policy     index.Policy
		want       routing.WorkerID
		pOn1, qOn1 int32
	}{
		{index.PolicyTTL, 1, 4, 4},
		{index.PolicyLRU, 2, 0, 4},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			rg := newRig(t, DeciderConfig{ApproximateMode: true, ApproxPolicy: tc.policy}, 2, 5)
			_, running := rg.route("r", r, 1, 0)
			rg.serve("p", p, 1)
			rg.serve("q", q, 1)
			if got := rg.held(p, 1); got != tc.pOn1 {
				t.Fatalf("after Q, engine 1 holds %d blocks of P, want %d", got, tc.pOn1)
			}
			if got := rg.held(q, 1); got != tc.qOn1 {
				t.Fatalf("after Q, engine 1 holds %d blocks of Q, want %d", got, tc.qOn1)
			}
			if got := rg.held(r, 1); got != 1 {
				t.Fatalf("the running request's block was evicted (held %d)", got)
			}
			if w := rg.serve("p2", p, 0); w.ID != tc.want {
				t.Fatalf("P again went to engine %d, want %d", w.ID, tc.want)
			}
			if got := rg.held(p, tc.want); got != 4 {
				t.Fatalf("the decision was not predicted on engine %d (holds %d blocks of P)", tc.want, got)
			}
			running.Done(context.Background(), Succeeded)
		})
	}
}

// TestApproxLRUNeedsApproximateMode checks that LRU without approximate
// mode, where it would do nothing, is refused naming the key.
func TestApproxLRUNeedsApproximateMode(t *testing.T) {
	cfg := DeciderConfig{Policy: NameKV, Options: DefaultOptions(nil), ApproxPolicy: index.PolicyLRU,
		Now: rigClock}
	_, err := NewDecider(cfg, index.NewExact())
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "approx_policy") {
		t.Fatalf("LRU with KV events: %v, want ErrInvalidConfig naming approx_policy", err)
	}
}
