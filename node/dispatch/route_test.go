package dispatch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

func TestRoutePrefixOverlap(t *testing.T) {
	long := prompt(1000, 64*testBlockSize)
	tests := []struct {
		name    string
		tokens  []uint32
		want    routing.WorkerID // 0: any engine but notWant
		notWant routing.WorkerID
	}{
		{name: "shared long prefix lands on the holder", tokens: concat(long, prompt(9, 40)), want: 3},
		{name: "exact repeat lands on the holder", tokens: long, want: 3},
		{name: "fresh prompt goes to an idle engine", tokens: prompt(50_000, 64*testBlockSize), notWant: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 4, nil)
			f.feed.store(w1(3), long)
			// Engine 3 is busy with one request, so only its cache can win it.
			busy := f.route(f.req(long))
			defer busy.Done(nil)
			if busy.Worker != w1(3) || busy.CachedBlocks != 64 {
				t.Fatalf("first request: worker %v cached %d, want 3/0 with 64 blocks", busy.Worker, busy.CachedBlocks)
			}
			dec := f.route(f.req(tc.tokens))
			defer dec.Done(nil)
			if tc.want != 0 && dec.Worker.ID != tc.want {
				t.Errorf("worker %v, want engine %d", dec.Worker, tc.want)
			}
			if tc.notWant != 0 && dec.Worker.ID == tc.notWant {
				t.Errorf("worker %v, want any engine but %d", dec.Worker, tc.notWant)
			}
			if dec.EndpointURL != fmt.Sprintf("http://engine-%d:8000", dec.Worker.ID) {
				t.Errorf("endpoint %q", dec.EndpointURL)
			}
		})
	}
}

func TestRouteTextSticksViaApproxIndex(t *testing.T) {
	f := newFixture(t, 4, nil)
	text := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 100)
	first := f.route(&Request{ID: "a", Model: "m", Text: text})
	first.Done(nil)
	if first.Blocks != len(text)/4/testBlockSize {
		t.Errorf("blocks %d, want %d", first.Blocks, len(text)/4/testBlockSize)
	}
	for i := range 5 {
		dec := f.route(&Request{ID: fmt.Sprint("b", i), Model: "m", Text: text})
		if dec.Worker != first.Worker {
			t.Fatalf("repeat %d went to %v, want %v", i, dec.Worker, first.Worker)
		}
		if dec.CachedBlocks == 0 {
			t.Errorf("repeat %d: no predicted cached blocks", i)
		}
		dec.Done(nil)
	}
	if f.d.core.Approx().Stats().Pairs == 0 {
		t.Error("text decisions were not recorded in the approximate index")
	}
}

func TestRouteApproximateModeRecordsTokens(t *testing.T) {
	f := newFixture(t, 4, func(c *Config) { c.ApproximateMode = true })
	p := prompt(7, 32*testBlockSize)
	first := f.route(f.req(p))
	first.Done(nil)
	second := f.route(f.req(concat(p, prompt(1, 5))))
	second.Done(nil)
	if second.Worker != first.Worker || second.CachedBlocks != 32 {
		t.Errorf("second: %v with %d cached, want %v with 32", second.Worker, second.CachedBlocks, first.Worker)
	}
}

func TestRoutePredictOnRoute(t *testing.T) {
	f := newFixture(t, 4, func(c *Config) { c.PredictTTL = 5 * time.Second })
	p := prompt(7, 32*testBlockSize)
	first := f.route(f.req(p))
	first.Done(nil)
	second := f.route(f.req(p))
	second.Done(nil)
	if second.Worker != first.Worker || second.CachedBlocks != 32 {
		t.Errorf("second: %v with %d cached, want %v with 32", second.Worker, second.CachedBlocks, first.Worker)
	}
	f.clock.Advance(6 * time.Second)
	third := f.route(f.req(p))
	third.Done(nil)
	if third.CachedBlocks != 0 {
		t.Errorf("prediction outlived its TTL: %d cached", third.CachedBlocks)
	}
}

func TestLoadFreedOnDone(t *testing.T) {
	tests := []struct {
		name       string
		firstToken bool
		err        error
	}{
		{name: "success", firstToken: true},
		{name: "success without first token"},
		{name: "error before first token", err: errors.New("engine refused")},
		{name: "error after first token", firstToken: true, err: errors.New("stream cut")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2, nil)
			dec := f.route(f.req(prompt(1, 100)))
			w := dec.Worker
			if l := f.active(w); l.ActiveRequests != 1 || l.PrefillTokens != 100 {
				t.Fatalf("booked load %+v, want 1 request of 100 prefill tokens", l)
			}
			// Gauges name the engine by its endpoint URL, stable across
			// restarts, not by its id.
			id, rank := fmt.Sprintf("http://engine-%d:8000", w.ID), strconv.Itoa(int(w.Rank))
			if g := testutil.ToFloat64(f.m.WorkerActivePrefillTokens.WithLabelValues(id, rank, "aggregated")); g != 100 {
				t.Errorf("prefill gauge %v, want 100", g)
			}
			if tc.firstToken {
				dec.OnFirstToken()
				if l := f.active(w); l.PrefillTokens != 0 || l.ActiveRequests != 1 {
					t.Errorf("after first token %+v, want no prefill, 1 request", l)
				}
			}
			dec.Done(tc.err)
			dec.Done(tc.err) // later calls do nothing
			if l := f.active(w); l != (routing.Load{}) {
				t.Errorf("after Done: %+v, want zero", l)
			}
			if g := testutil.ToFloat64(f.m.WorkerActiveDecodeBlocks.WithLabelValues(id, rank, "aggregated")); g != 0 {
				t.Errorf("decode gauge %v, want 0", g)
			}
		})
	}
}

func TestRouteErrors(t *testing.T) {
	thresh := int64(0)
	tests := []struct {
		name  string
		edit  func(*Config)
		setup func(*fixture)
		req   func(*fixture) *Request
		want  error
	}{
		{name: "nil request", req: func(*fixture) *Request { return nil }, want: ErrBadRequest},
		{name: "no id", req: func(*fixture) *Request { return &Request{Model: "m"} }, want: ErrBadRequest},
		{name: "no model", req: func(*fixture) *Request { return &Request{ID: "x"} }, want: ErrBadRequest},
		{name: "unknown model", req: func(f *fixture) *Request { r := f.req(prompt(1, 10)); r.Model = "nope"; return r }, want: ErrModelNotFound},
		{name: "known model without live engine", setup: func(f *fixture) { f.engines.setLive(1, false); f.engines.setLive(2, false) },
			req: func(f *fixture) *Request { return f.req(prompt(1, 10)) }, want: ErrNoEngine},
		{name: "tokens too long", edit: func(c *Config) { c.MaxPromptTokens = 100 },
			req: func(f *fixture) *Request { return f.req(prompt(1, 101)) }, want: ErrPromptTooLong},
		{name: "text too long", edit: func(c *Config) { c.MaxPromptTokens = 100 },
			req: func(*fixture) *Request { return &Request{ID: "x", Model: "m", Text: strings.Repeat("a", 401)} }, want: ErrPromptTooLong},
		{name: "session id too long", req: func(f *fixture) *Request { r := f.req(nil); r.SessionID = strings.Repeat("s", 257); return r }, want: ErrSessionLimit},
		{name: "parent id too long", req: func(f *fixture) *Request { r := f.req(nil); r.ParentSessionID = strings.Repeat("s", 257); return r }, want: ErrSessionLimit},
		{name: "all busy", edit: func(c *Config) { c.Thresholds.ActivePrefillTokens = &thresh },
			setup: func(f *fixture) { f.route(f.req(prompt(1, 10))); f.route(f.req(prompt(2, 10))) },
			req:   func(f *fixture) *Request { return f.req(prompt(3, 10)) }, want: ErrOverloaded},
		{name: "pinned busy", edit: func(c *Config) { c.Thresholds.ActivePrefillTokens = &thresh },
			setup: func(f *fixture) { r := f.req(prompt(1, 10)); r.Pin = &Pin{Engine: 1}; f.route(r) },
			req:   func(f *fixture) *Request { r := f.req(prompt(3, 10)); r.Pin = &Pin{Engine: 1}; return r }, want: ErrOverloaded},
		{name: "pinned unknown engine", req: func(f *fixture) *Request { r := f.req(prompt(3, 10)); r.Pin = &Pin{Engine: 9}; return r }, want: ErrBadRequest},
		{name: "pinned unknown rank", req: func(f *fixture) *Request { r := f.req(prompt(3, 10)); r.Pin = &Pin{Engine: 1, Rank: 4}; return r }, want: ErrBadRequest},
		{name: "duplicate request id", setup: func(f *fixture) { f.route(&Request{ID: "dup", Model: "m"}) },
			req: func(*fixture) *Request { return &Request{ID: "dup", Model: "m"} }, want: ErrBadRequest},
		{name: "reported load makes all busy", edit: func(c *Config) { c.Thresholds.ActivePrefillTokens = &thresh },
			setup: func(f *fixture) {
				f.engines.setLoad(w1(1), routing.Load{PrefillTokens: 5})
				f.engines.setLoad(w1(2), routing.Load{PrefillTokens: 5})
			},
			req: func(f *fixture) *Request { return f.req(prompt(3, 10)) }, want: ErrOverloaded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2, tc.edit)
			if tc.setup != nil {
				tc.setup(f)
			}
			dec, err := f.d.Route(t0ctx, tc.req(f))
			if !errors.Is(err, tc.want) || dec != nil {
				t.Fatalf("Route: %v, %v; want %v", dec, err, tc.want)
			}
		})
	}
}

func TestPinRoutes(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.feed.store(w1(1), prompt(1, 64))
	r := f.req(prompt(1, 64))
	r.Pin = &Pin{Engine: 2}
	if dec := f.route(r); dec.Worker != w1(2) {
		t.Errorf("pinned to 2, routed to %v", dec.Worker)
	}
}

func TestReportedLoadSteersAway(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.engines.setLoad(w1(1), routing.Load{PrefillTokens: 100_000, ActiveRequests: 50})
	for range 10 {
		dec := f.route(f.req(prompt(uint32(f.seq*1000), 64)))
		if dec.Worker != w1(2) {
			t.Fatalf("routed to the loaded engine %v", dec.Worker)
		}
		dec.Done(nil)
	}
}

func TestBlockSizeMismatchExcluded(t *testing.T) {
	f := newFixture(t, 1, nil)
	f.engines.add(2, "m", 1, 32) // disagrees with the model's first rank
	for range 10 {
		dec := f.route(f.req(prompt(uint32(f.seq*1000), 64)))
		if dec.Worker != w1(1) {
			t.Fatalf("routed to the rank of another block size %v", dec.Worker)
		}
		dec.Done(nil)
	}
}

func TestRemoveEngineDropsLoad(t *testing.T) {
	f := newFixture(t, 2, nil)
	r := f.req(prompt(1, 64))
	r.Pin = &Pin{Engine: 1}
	dec := f.route(r)
	f.engines.remove(1)
	f.d.RemoveEngine(1)
	if l := f.active(w1(1)); l != (routing.Load{}) {
		t.Errorf("load after RemoveEngine %+v, want zero", l)
	}
	dec.Done(nil) // a late completion is harmless
	if got := testutil.CollectAndCount(f.m.WorkerActivePrefillTokens); got != 0 {
		t.Errorf("%d gauge series left for the removed engine", got)
	}
	next := f.route(f.req(prompt(1, 64)))
	if next.Worker != w1(2) {
		t.Errorf("routed to %v after removal", next.Worker)
	}
}

func TestExpireLostRequests(t *testing.T) {
	f := newFixture(t, 1, func(c *Config) { c.MaxRequestAge = time.Minute; c.ExpireInterval = 10 * time.Second })
	f.route(f.req(prompt(1, 64))) // never finished
	f.clock.Advance(30 * time.Second)
	f.route(f.req(prompt(2, 64))).Done(nil)
	if l := f.active(w1(1)); l.ActiveRequests != 1 {
		t.Fatalf("expired too early: %+v", l)
	}
	f.clock.Advance(31 * time.Second)
	f.route(f.req(prompt(3, 64))).Done(nil)
	if l := f.active(w1(1)); l.ActiveRequests != 0 {
		t.Errorf("lost request not expired: %+v", l)
	}
}

func TestModels(t *testing.T) {
	f := newFixture(t, 2, nil)
	got := f.d.Models()
	if len(got) != 1 || got[0].ID != "m" || got[0].Engines != 2 {
		t.Errorf("Models() = %+v", got)
	}
}

func TestMetricsObserved(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.feed.store(w1(1), prompt(1, 64))
	f.route(f.req(prompt(1, 64))).Done(nil)
	if n := testutil.CollectAndCount(f.m.Overhead); n != 4 {
		t.Errorf("%d overhead phases observed, want 4", n)
	}
	if n := testutil.CollectAndCount(f.m.PredictedHitRate); n != 1 {
		t.Errorf("hit rate not observed (%d series)", n)
	}
}

func TestMapPolicyError(t *testing.T) {
	tests := []struct {
		name  string
		cause error
		want  error
	}{
		{name: "all overloaded", cause: policy.ErrAllWorkersOverloaded, want: ErrOverloaded},
		{name: "pinned overloaded", cause: policy.ErrPinnedWorkerOverloaded, want: ErrOverloaded},
		{name: "no compatible", cause: policy.ErrNoCompatibleWorker, want: ErrNoEngine},
		{name: "pin not found", cause: policy.ErrPinnedWorkerNotFound, want: ErrBadRequest},
		{name: "rank out of range", cause: policy.ErrPinnedRankOutOfRange, want: ErrBadRequest},
		{name: "direct without pin", cause: policy.ErrNoPinnedWorker, want: ErrBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := mapPolicyError(fmt.Errorf("filter: %w", tc.cause))
			if !errors.Is(err, tc.want) || !errors.Is(err, tc.cause) {
				t.Errorf("%v: want %v wrapping the cause", err, tc.want)
			}
		})
	}
}
