package dispatch

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing/policy"
)

// TestSelectBooksNothing: Select decides as Route would (the cache
// decides) and leaves no load behind.
func TestSelectBooksNothing(t *testing.T) {
	f := newFixture(t, 3, nil)
	long := prompt(100, 640)
	f.feed.store(w1(2), long)
	sel, err := f.d.Select(t0ctx, f.req(long))
	if err != nil {
		t.Fatal(err)
	}
	if sel.Worker != w1(2) || sel.CachedBlocks != 640/testBlockSize || sel.Blocks != 640/testBlockSize {
		t.Fatalf("selection %+v, want engine 2 with every block cached", sel)
	}
	if sel.EndpointURL != "http://engine-2:8000" || sel.BlockSize != testBlockSize {
		t.Errorf("endpoint %q block size %d", sel.EndpointURL, sel.BlockSize)
	}
	if n := f.d.core.Booked(); n != 0 {
		t.Errorf("%d bookings after Select, want 0", n)
	}
	dec := f.route(f.req(long))
	if dec.Worker != sel.Worker {
		t.Errorf("Route chose %v, Select %v", dec.Worker, sel.Worker)
	}
	dec.Done(nil)
}

// TestSelectCostBreakdown: every candidate is reported with its overlap
// and, under the kv selector, its cost; the chosen one is the cheapest.
func TestSelectCostBreakdown(t *testing.T) {
	f := newFixture(t, 3, nil)
	long := prompt(100, 640)
	f.feed.store(w1(3), long[:320])
	sel, err := f.d.Select(t0ctx, f.req(long))
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Candidates) != 3 || sel.Reason == "" || sel.Reason == ReasonSession {
		t.Fatalf("breakdown %+v", sel)
	}
	var chosen CandidateCost
	for _, c := range sel.Candidates {
		if !c.Eligible || !c.Costed {
			t.Fatalf("candidate %+v not eligible or without a cost", c)
		}
		if c.Worker == sel.Worker {
			chosen = c
		}
	}
	if chosen.Worker != w1(3) || chosen.Overlap.Device != 320/testBlockSize {
		t.Fatalf("chosen %+v, want engine 3 with 20 blocks cached", chosen)
	}
	for _, c := range sel.Candidates {
		if c.Cost < chosen.Cost {
			t.Errorf("candidate %v costs %v, less than the chosen %v", c.Worker, c.Cost, chosen.Cost)
		}
	}
}

// TestSelectBindsSession: a session's first Select binds it, and the next
// one follows the binding even where the cache points elsewhere.
func TestSelectBindsSession(t *testing.T) {
	f := affinityFixture(t, 3, nil)
	first, err := f.d.Select(t0ctx, f.sreq("s", prompt(1, 64)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.Session(t0ctx, "s"); err != nil {
		t.Fatalf("session not bound after Select: %v", err)
	}
	long := prompt(500, 640)
	f.feed.store(w1(first.Worker.ID%3+1), long)
	next, err := f.d.Select(t0ctx, f.sreq("s", long))
	if err != nil {
		t.Fatal(err)
	}
	if next.Worker != first.Worker || !next.SessionBound || next.Reason != ReasonSession {
		t.Fatalf("second selection %v bound=%v reason %q, want %v by session", next.Worker, next.SessionBound, next.Reason, first.Worker)
	}
	if n := f.events(policy.AffinityBind); n != 1 {
		t.Errorf("%v binds, want 1", n)
	}
	if n := f.d.core.Booked(); n != 0 {
		t.Errorf("%d bookings, want 0", n)
	}
}

// TestSelectErrors: Select refuses what Route refuses, with Route's
// sentinels.
func TestSelectErrors(t *testing.T) {
	f := newFixture(t, 1, nil)
	tests := []struct {
		name string
		edit func(*Request)
		want error
	}{
		{name: "no id", edit: func(r *Request) { r.ID = "" }, want: ErrBadRequest},
		{name: "unknown model", edit: func(r *Request) { r.Model = "nope" }, want: ErrModelNotFound},
		{name: "prompt too long", edit: func(r *Request) { r.Tokens = make([]uint32, DefaultConfig().MaxPromptTokens+1) }, want: ErrPromptTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.req(prompt(1, 32))
			tc.edit(r)
			if _, err := f.d.Select(t0ctx, r); !errors.Is(err, tc.want) {
				t.Fatalf("Select: %v, want %v", err, tc.want)
			}
		})
	}
	f.engines.setLive(1, false)
	if _, err := f.d.Select(t0ctx, f.req(prompt(1, 32))); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("Select without a live engine: %v, want ErrNoEngine", err)
	}
}
