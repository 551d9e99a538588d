package dispatch

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/routing"
)

// TestDecisionCounters: routed requests, decisions that passed over the
// best-cached engine, and overload refusals by reason are counted.
func TestDecisionCounters(t *testing.T) {
	long := prompt(1000, 64*testBlockSize)
	zero, thresh := 0.0, int64(0)
	f := newFixture(t, 2, nil)
	dm := f.d.obs.decisions.m
	f.feed.store(w1(1), long)
	f.engines.setLoad(w1(1), routing.Load{DecodeBlocks: 10, ActiveRequests: 1})
	cached := f.route(f.req(long)) // engine 1, for its cache
	r := f.req(long)
	r.OverlapScoreCredit = &zero // engine 2: the cache is passed over
	passed := f.route(r)
	if cached.Worker.ID != 1 || passed.Worker.ID != 2 {
		t.Fatalf("decisions %v and %v, want engines 1 and 2", cached.Worker, passed.Worker)
	}
	cached.Done(nil)
	passed.Done(nil)
	// A fleet whose engines are all busy refuses, by reason.
	busy := newFixture(t, 2, func(c *Config) { c.Thresholds.ActivePrefillTokens = &thresh })
	busy.d.obs.decisions = f.d.obs.decisions
	busy.route(busy.req(prompt(1, 10)))
	busy.route(busy.req(prompt(2, 10)))
	if _, err := busy.d.Route(t0ctx, busy.req(prompt(3, 10))); err == nil {
		t.Fatal("a third request found a free engine")
	}
	pinned := busy.req(prompt(4, 10))
	pinned.Pin = &Pin{Engine: 1, AnyRank: true}
	_, _ = busy.d.Route(t0ctx, pinned)
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"routed", testutil.ToFloat64(dm.Routed.WithLabelValues("m")), 4},
		{"non-max overlap", testutil.ToFloat64(dm.NonMaxOverlap.WithLabelValues("m")), 1},
		{"all overloaded", testutil.ToFloat64(dm.Rejections.WithLabelValues("m", "all_workers_overloaded")), 1},
		{"pinned overloaded", testutil.ToFloat64(dm.Rejections.WithLabelValues("m", "pinned_worker_overloaded")), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
