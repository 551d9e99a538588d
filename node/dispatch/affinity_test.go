package dispatch

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

const testTTL = time.Minute

// affinityFixture is a fixture with hard affinity on.
func affinityFixture(t *testing.T, n int, edit func(*Config)) *fixture {
	return newFixture(t, n, func(c *Config) {
		c.AffinityTTL = testTTL
		if edit != nil {
			edit(c)
		}
	})
}

// sreq is a request of session s.
func (f *fixture) sreq(s string, tokens []uint32) *Request {
	r := f.req(tokens)
	r.SessionID = s
	return r
}

// events reads an affinity event counter.
func (f *fixture) events(ev policy.AffinityEvent) float64 {
	return testutil.ToFloat64(f.m.AffinityEvents.WithLabelValues(string(ev)))
}

func TestHardBindingSticks(t *testing.T) {
	f := affinityFixture(t, 4, nil)
	first := f.route(f.sreq("s", prompt(1, 64)))
	if first.SessionBound {
		t.Fatal("first request of a session reported bound")
	}
	first.Done(nil)
	bound := first.Worker
	other := w1(bound.ID%4 + 1)
	long := prompt(500, 640)
	f.feed.store(other, long) // another engine holds the next prompt entirely
	for i := range 3 {
		dec := f.route(f.sreq("s", long))
		if dec.Worker != bound || !dec.SessionBound {
			t.Fatalf("request %d: %v bound=%v, want %v bound", i, dec.Worker, dec.SessionBound, bound)
		}
		dec.Done(nil)
	}
	// Without the session the cache decides.
	if dec := f.route(f.req(long)); dec.Worker != other {
		t.Errorf("sessionless request went to %v, want %v", dec.Worker, other)
	}
	if f.events(policy.AffinityBind) != 1 || f.events(policy.AffinityHit) != 3 {
		t.Errorf("bind %v hit %v, want 1 and 3", f.events(policy.AffinityBind), f.events(policy.AffinityHit))
	}
	if g := testutil.ToFloat64(f.m.SessionBindings); g != 1 {
		t.Errorf("bindings gauge %v, want 1", g)
	}
}

func TestBindAtFirstTokenAndNotOnFailure(t *testing.T) {
	tests := []struct {
		name       string
		firstToken bool
		err        error
		wantBound  bool
	}{
		{name: "first token binds before done", firstToken: true, wantBound: true},
		{name: "success without first token binds", wantBound: true},
		{name: "failure before first token does not bind", err: errors.New("refused")},
		{name: "failure after first token keeps the binding", firstToken: true, err: errors.New("cut"), wantBound: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := affinityFixture(t, 4, nil)
			first := f.route(f.sreq("s", prompt(1, 64)))
			if tc.firstToken {
				first.OnFirstToken()
			}
			first.Done(tc.err)
			_, ok, _ := f.d.bindings.Lookup(t0ctx, "s", f.clock.Now())
			if ok != tc.wantBound {
				t.Errorf("bound = %v, want %v", ok, tc.wantBound)
			}
		})
	}
}

func TestBoundEngineGoneRebinds(t *testing.T) {
	tests := []struct {
		name string
		gone func(f *fixture, id routing.WorkerID)
	}{
		{name: "engine removed", gone: func(f *fixture, id routing.WorkerID) { f.engines.remove(id); f.d.RemoveEngine(id) }},
		{name: "engine not live", gone: func(f *fixture, id routing.WorkerID) { f.engines.setLive(id, false) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := affinityFixture(t, 3, nil)
			first := f.route(f.sreq("s", prompt(1, 64)))
			first.Done(nil)
			tc.gone(f, first.Worker.ID)
			second := f.route(f.sreq("s", prompt(1, 64)))
			if second.Worker == first.Worker || second.SessionBound {
				t.Fatalf("second: %v bound=%v after %v left", second.Worker, second.SessionBound, first.Worker)
			}
			second.OnFirstToken()
			second.Done(nil)
			third := f.route(f.sreq("s", prompt(1, 64)))
			if third.Worker != second.Worker || !third.SessionBound {
				t.Errorf("third: %v bound=%v, want %v bound", third.Worker, third.SessionBound, second.Worker)
			}
			if f.events(policy.AffinityInvalidate) != 1 {
				t.Errorf("invalidations %v, want 1", f.events(policy.AffinityInvalidate))
			}
		})
	}
}

func TestBindingTTL(t *testing.T) {
	f := affinityFixture(t, 4, nil)
	first := f.route(f.sreq("s", prompt(1, 64)))
	first.Done(nil)
	f.clock.Advance(testTTL - time.Second)
	if dec := f.route(f.sreq("s", prompt(1, 64))); !dec.SessionBound {
		t.Fatal("binding expired before its TTL")
	} else {
		dec.Done(nil) // restarts the idle timer
	}
	f.clock.Advance(testTTL - time.Second)
	if dec := f.route(f.sreq("s", prompt(1, 64))); !dec.SessionBound {
		t.Fatal("idle timer did not restart at the last request's end")
	} else {
		dec.Done(nil)
	}
	f.clock.Advance(testTTL + time.Second)
	if dec := f.route(f.sreq("s", prompt(1, 64))); dec.SessionBound {
		t.Error("binding outlived its idle TTL")
	}
	if f.events(policy.AffinityExpire) != 1 {
		t.Errorf("expire events %v, want 1", f.events(policy.AffinityExpire))
	}
}

func TestActiveRequestsHoldBinding(t *testing.T) {
	f := affinityFixture(t, 4, nil)
	f.route(f.sreq("s", prompt(1, 64))).Done(nil)
	long := f.route(f.sreq("s", prompt(1, 64))) // runs for hours
	if !long.SessionBound {
		t.Fatal("second request not bound")
	}
	f.clock.Advance(10 * testTTL)
	mid := f.route(f.sreq("s", prompt(1, 64)))
	if !mid.SessionBound {
		t.Fatal("binding expired while a request held it")
	}
	mid.Done(nil)
	long.Done(nil)
	f.clock.Advance(testTTL / 2)
	if dec := f.route(f.sreq("s", prompt(1, 64))); !dec.SessionBound {
		t.Fatal("binding expired before the idle TTL after the last release")
	} else {
		dec.Done(nil)
	}
	f.clock.Advance(testTTL + time.Second)
	if dec := f.route(f.sreq("s", prompt(1, 64))); dec.SessionBound {
		t.Error("binding did not expire after the last release")
	}
}

func TestParentGroupShares(t *testing.T) {
	f := affinityFixture(t, 4, nil)
	parent := f.route(f.sreq("p", prompt(1, 64)))
	parent.Done(nil)
	for i := range 4 {
		r := f.sreq(fmt.Sprint("child", i), prompt(uint32(100*i), 64))
		r.ParentSessionID = "p"
		dec := f.route(r)
		if dec.Worker != parent.Worker || !dec.SessionBound {
			t.Fatalf("child %d: %v bound=%v, want %v", i, dec.Worker, dec.SessionBound, parent.Worker)
		}
		dec.Done(nil)
	}
	if n := f.d.bindings.Len(); n != 1 {
		t.Errorf("%d bindings, want the group's one", n)
	}
}

func TestSessionLimit(t *testing.T) {
	f := affinityFixture(t, 4, func(c *Config) { c.MaxSessions = 2 })
	f.route(f.sreq("a", prompt(1, 64))).Done(nil)
	f.route(f.sreq("b", prompt(1, 64))).Done(nil)
	if _, err := f.d.Route(t0ctx, f.sreq("c", prompt(1, 64))); !errors.Is(err, ErrSessionLimit) {
		t.Fatalf("third session: %v, want ErrSessionLimit", err)
	}
	// Known sessions and sessionless requests still route.
	f.route(f.sreq("a", prompt(1, 64))).Done(nil)
	f.route(f.req(prompt(1, 64))).Done(nil)
	// Expiry makes room.
	f.clock.Advance(testTTL + 2*time.Second)
	f.route(f.sreq("c", prompt(1, 64))).Done(nil)
}

func TestExplicitUnbind(t *testing.T) {
	f := affinityFixture(t, 4, nil)
	f.route(f.sreq("s", prompt(1, 64))).Done(nil)
	if err := f.d.Unbind(t0ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if dec := f.route(f.sreq("s", prompt(1, 64))); dec.SessionBound {
		t.Error("request bound after Unbind")
	}
	if err := f.d.Unbind(t0ctx, string(make([]byte, 300))); !errors.Is(err, ErrSessionLimit) {
		t.Errorf("Unbind of a long id: %v", err)
	}
	if f.events(policy.AffinityUnbind) != 1 {
		t.Errorf("unbind events %v, want 1", f.events(policy.AffinityUnbind))
	}
}

func TestSessionFinal(t *testing.T) {
	f := affinityFixture(t, 4, nil)
	f.route(f.sreq("s", prompt(1, 64))).Done(nil)
	r := f.sreq("s", prompt(1, 64))
	r.SessionFinal = true
	dec := f.route(r)
	if !dec.SessionBound {
		t.Fatal("final request not bound")
	}
	dec.Done(nil)
	if n := f.d.bindings.Len(); n != 0 {
		t.Errorf("%d bindings after the final request", n)
	}
	// A final request of a new session binds nothing.
	r = f.sreq("t", prompt(1, 64))
	r.SessionFinal = true
	f.route(r).Done(nil)
	if n := f.d.bindings.Len(); n != 0 {
		t.Errorf("%d bindings after a new session's final request", n)
	}
}

func TestConcurrentFirstRequestsFirstBindWins(t *testing.T) {
	f := affinityFixture(t, 4, nil)
	f.feed.store(w1(2), prompt(1, 640))
	a := f.route(f.sreq("s", prompt(1, 640)))
	b := f.route(f.sreq("s", prompt(1_000_000, 640))) // another prefix, another engine
	if a.Worker == b.Worker {
		t.Fatalf("setup: both on %v", a.Worker)
	}
	b.OnFirstToken() // b is first to succeed
	a.OnFirstToken()
	a.Done(nil)
	b.Done(nil)
	c := f.route(f.sreq("s", prompt(1, 640)))
	if c.Worker != b.Worker || !c.SessionBound {
		t.Errorf("third: %v, want the first binder %v", c.Worker, b.Worker)
	}
	if f.events(policy.AffinityConflict) != 1 || f.events(policy.AffinityBind) != 1 {
		t.Errorf("conflict %v bind %v, want 1 and 1", f.events(policy.AffinityConflict), f.events(policy.AffinityBind))
	}
}

func TestSoftModeMovesOffBusyEngine(t *testing.T) {
	limit := int64(100)
	f := affinityFixture(t, 2, func(c *Config) {
		c.AffinityMode = AffinitySoft
		c.Thresholds.ActivePrefillTokens = &limit
	})
	first := f.route(f.sreq("s", prompt(1, 64)))
	first.Done(nil)
	// A sessionless long prompt pinned on the bound engine makes it busy.
	hog := f.req(prompt(9, 1000))
	hog.Pin = &Pin{Engine: first.Worker.ID}
	hogDec := f.route(hog)
	moved := f.route(f.sreq("s", prompt(1, 64)))
	if moved.Worker == first.Worker || moved.SessionBound {
		t.Fatalf("soft binding followed to a busy engine: %v", moved.Worker)
	}
	moved.Done(nil)
	hogDec.Done(nil)
	next := f.route(f.sreq("s", prompt(1, 64)))
	if next.Worker != moved.Worker || !next.SessionBound {
		t.Errorf("binding did not move: %v, want %v", next.Worker, moved.Worker)
	}
	if f.events(policy.AffinityRebind) != 1 {
		t.Errorf("rebinds %v, want 1", f.events(policy.AffinityRebind))
	}
}

func TestHardModeIgnoresBusy(t *testing.T) {
	limit := int64(100)
	f := affinityFixture(t, 2, func(c *Config) { c.Thresholds.ActivePrefillTokens = &limit })
	first := f.route(f.sreq("s", prompt(1, 64)))
	first.Done(nil)
	hog := f.req(prompt(9, 1000))
	hog.Pin = &Pin{Engine: first.Worker.ID}
	defer f.route(hog).Done(nil)
	if dec := f.route(f.sreq("s", prompt(1, 64))); dec.Worker != first.Worker || !dec.SessionBound {
		t.Errorf("hard binding not followed: %v", dec.Worker)
	}
}

func TestPinnedRequestLeavesBindingAlone(t *testing.T) {
	f := affinityFixture(t, 2, nil)
	first := f.route(f.sreq("s", prompt(1, 64)))
	first.Done(nil)
	r := f.sreq("s", prompt(1, 64))
	r.Pin = &Pin{Engine: first.Worker.ID%2 + 1}
	pinned := f.route(r)
	if pinned.Worker.ID != r.Pin.Engine || pinned.SessionBound {
		t.Fatalf("pinned request: %v bound=%v", pinned.Worker, pinned.SessionBound)
	}
	pinned.Done(nil)
	if dec := f.route(f.sreq("s", prompt(1, 64))); dec.Worker != first.Worker {
		t.Errorf("binding moved by a pinned request to %v", dec.Worker)
	}
}

func TestAffinityOffIgnoresSessions(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.route(f.sreq("s", prompt(1, 64))).Done(nil)
	if f.d.bindings != nil {
		t.Fatal("a store exists with affinity off")
	}
	if dec := f.route(f.sreq("s", prompt(1, 64))); dec.SessionBound {
		t.Error("bound with affinity off")
	}
	if err := f.d.Unbind(t0ctx, "s"); err != nil {
		t.Error(err)
	}
}
