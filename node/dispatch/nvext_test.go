package dispatch

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// TestExpectedOutputIsBooked: the client's expected output length books
// the blocks its output will fill when output blocks are tracked, and is
// ignored when they are not.
func TestExpectedOutputIsBooked(t *testing.T) {
	tests := []struct {
		name       string
		track      bool
		isl, osl   int
		wantBlocks int64
	}{
		// 64 prompt tokens are 4 blocks; 160 output tokens fill 10 more.
		{"tracked with osl", true, 64, 160, 14},
		{"tracked without osl", true, 64, 0, 4},
		{"osl ignored untracked", false, 64, 160, 4},
		// 72 tokens end in a half block, which 8 output tokens complete.
		{"partial tail block filled first", true, 72, 8, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1, func(c *Config) { c.Tracking.OutputBlocks = tc.track })
			r := f.req(prompt(1, tc.isl))
			r.OutputTokens = tc.osl
			dec := f.route(r)
			if got := f.active(w1(1)).DecodeBlocks; got != tc.wantBlocks {
				t.Errorf("booked %d decode blocks, want %d", got, tc.wantBlocks)
			}
			dec.Done(nil)
			if got := f.active(w1(1)).DecodeBlocks; got != 0 {
				t.Errorf("%d decode blocks left after Done", got)
			}
		})
	}
}

// TestExpectedOutputWeighsInSelection: two idle engines, one already
// running a long generation whose expected output was declared; a new
// request goes to the other one.
func TestExpectedOutputWeighsInSelection(t *testing.T) {
	f := newFixture(t, 2, func(c *Config) { c.Tracking.OutputBlocks = true })
	long := f.req(prompt(1, 16))
	long.OutputTokens = 4096
	first := f.route(long)
	defer first.Done(nil)
	next := f.route(f.req(prompt(500, 16)))
	defer next.Done(nil)
	if next.Worker == first.Worker {
		t.Fatalf("second request joined the engine with 256 expected output blocks (%v)", first.Worker)
	}
}

// TestRequestOverlapCredit: the per-request overlap credit replaces the
// cost model's for that request only.
func TestRequestOverlapCredit(t *testing.T) {
	long := prompt(1000, 64*testBlockSize)
	zero := 0.0
	tests := []struct {
		name   string
		credit *float64
		want   routing.WorkerID
	}{
		{"default credit follows the cache", nil, 1},
		{"no credit follows the load", &zero, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2, nil)
			f.feed.store(w1(1), long)
			// Engine 1 reports some decode load: with credit its cache
			// still wins; without, the idle engine is cheaper.
			f.engines.setLoad(w1(1), routing.Load{DecodeBlocks: 10, ActiveRequests: 1})
			r := f.req(long)
			r.OverlapScoreCredit = tc.credit
			dec := f.route(r)
			defer dec.Done(nil)
			if dec.Worker.ID != tc.want {
				t.Fatalf("engine %d, want %d", dec.Worker.ID, tc.want)
			}
		})
	}
	f := newFixture(t, 2, nil)
	r := f.req(long)
	bad := -1.0
	r.OverlapScoreCredit = &bad
	if _, err := f.d.Route(t0ctx, r); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("negative credit: %v, want ErrBadRequest", err)
	}
}

// TestDirectMode: the direct mode sends a request to the engine it names
// (nvext worker ids or the pin headers) and refuses one that names none.
func TestDirectMode(t *testing.T) {
	f := newFixture(t, 3, func(c *Config) { c.Policy = policy.NameDirect })
	for range 3 {
		r := f.req(prompt(1, 64))
		r.Pin = &Pin{Engine: 2, AnyRank: true}
		dec := f.route(r)
		if dec.Worker != w1(2) {
			t.Fatalf("direct request went to %v, want 2/0", dec.Worker)
		}
		dec.Done(nil)
	}
	if _, err := f.d.Route(t0ctx, f.req(prompt(1, 64))); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("request naming no engine: %v, want ErrBadRequest", err)
	}
	r := f.req(prompt(1, 64))
	r.Pin = &Pin{Engine: 9, AnyRank: true}
	if _, err := f.d.Route(t0ctx, r); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("request naming an unknown engine: %v, want ErrBadRequest", err)
	}
}
