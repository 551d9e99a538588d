package dispatch

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// TestSelectHostPort: the endpoint of an engine URL is its host and
// port, the scheme's port when it has none.
func TestSelectHostPort(t *testing.T) {
	for in, want := range map[string]string{"http://10.0.0.1:8000": "10.0.0.1:8000", "https://e.svc": "e.svc:443",
		"http://[::1]": "[::1]:80"} {
		if got, err := HostPort(in); err != nil || got != want {
			t.Errorf("HostPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := HostPort("nope"); err == nil {
		t.Error("a URL without a host has an endpoint")
	}
}

// TestSelectSubsetRestrictsTheChoice: a subset that leaves out the
// engine caching the prompt moves the choice to an engine it lists, in
// Route and Select alike; entries are matched by host and port in one
// spelling; a subset naming no engine (or empty) is ErrNoEngine.
func TestSelectSubsetRestrictsTheChoice(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.engines.urls = map[routing.WorkerID]string{3: "http://[FD00::3]:8000"}
	long := prompt(100, 640)
	f.feed.store(w1(2), long)
	if dec := f.route(f.req(long)); dec.Worker != w1(2) {
		t.Fatalf("without a subset: %v, want the caching engine 2", dec.Worker)
	} else {
		dec.Done(nil)
	}
	for _, subset := range [][]string{{"engine-1:8000"}, {" ENGINE-1:8000", "engine-2:9999", "junk"}} {
		r := f.req(long)
		r.Subset = subset
		dec := f.route(r)
		if dec.Worker != w1(1) {
			t.Fatalf("subset %q: %v, want engine 1", subset, dec.Worker)
		}
		dec.Done(nil)
		r.ID += "-select"
		sel, err := f.d.Select(t0ctx, r)
		if err != nil || sel.Worker != w1(1) {
			t.Fatalf("Select with subset %q: %+v, %v", subset, sel, err)
		}
	}
	r := f.req(long)
	r.Subset = []string{"[fd00::3]:8000"}
	if dec := f.route(r); dec.Worker != w1(3) {
		t.Fatalf("IPv6 subset: %v, want engine 3", dec.Worker)
	} else {
		dec.Done(nil)
	}
	for _, subset := range [][]string{{}, {"engine-9:8000"}} {
		r := f.req(long)
		r.Subset = subset
		if _, err := f.d.Route(t0ctx, r); !errors.Is(err, ErrNoEngine) {
			t.Errorf("subset %q: %v, want ErrNoEngine", subset, err)
		}
	}
	r = f.req(long)
	r.Subset, r.Pin = []string{"engine-1:8000"}, &Pin{Engine: 2, AnyRank: true}
	if _, err := f.d.Route(t0ctx, r); !errors.Is(err, ErrNoEngine) {
		t.Errorf("a pin outside the subset: %v, want ErrNoEngine", err)
	}
	if n := f.booked(); n != 0 {
		t.Errorf("%d bookings left", n)
	}
}

// TestSelectSubsetMovesABoundSession: a session bound to an engine the
// subset leaves out is served inside the subset and its binding moves
// there, as a soft miss moves it.
func TestSelectSubsetMovesABoundSession(t *testing.T) {
	f := affinityFixture(t, 2, nil)
	first := f.route(f.sreq("s", prompt(1, 64)))
	first.Done(nil)
	other := w1(first.Worker.ID%2 + 1)
	r := f.sreq("s", prompt(1, 64))
	r.Subset = []string{endpointOf(other.ID)}
	dec := f.route(r)
	if dec.Worker != other || dec.SessionBound {
		t.Fatalf("bound session outside the subset: %v bound=%v, want %v unbound", dec.Worker, dec.SessionBound, other)
	}
	dec.Done(nil)
	if next := f.route(f.sreq("s", prompt(1, 64))); next.Worker != other || !next.SessionBound {
		t.Fatalf("after the move: %v bound=%v, want %v bound", next.Worker, next.SessionBound, other)
	} else {
		next.Done(nil)
	}
}

// TestSelectSubsetQueuedWaitsForItsEngines: a queued request whose
// subset's engines are busy does not take the queue's turn from one that
// free capacity elsewhere can serve.
func TestSelectSubsetQueuedWaitsForItsEngines(t *testing.T) {
	f := queued(t, "")
	f.engines.add(2, "m", 1, testBlockSize)
	busy := f.route(f.req(prompt(1, 64)))
	restricted := f.req(prompt(500, 64))
	restricted.Subset = []string{endpointOf(busy.Worker.ID)}
	waiting := f.routeAsync(t0ctx, restricted)
	f.waitQueued(1)
	free := f.route(f.req(prompt(900, 64))) // the other engine is free: served at once
	if free.Worker == busy.Worker {
		t.Fatalf("served on the busy engine %v", free.Worker)
	}
	select {
	case r := <-waiting:
		t.Fatalf("the restricted request was served while its engine was busy: %v", r.err)
	case <-time.After(20 * f.d.queues.cfg.Poll):
	}
	busy.OnFirstToken()
	r := <-waiting
	if r.err != nil || r.dec.Worker != busy.Worker {
		t.Fatalf("restricted request: %v on %v", r.err, r.dec)
	}
	for _, d := range []*Decision{r.dec, busy, free} {
		d.Done(nil)
	}
}

// endpointOf is the endpoint of a fake engine with the default URL.
func endpointOf(id routing.WorkerID) string { return fmt.Sprintf("engine-%d:8000", id) }

// TestDisaggSubsetRestrictsDecodeAndNamedPrefill: a subset restricts the
// decode engine always, and the prefill engine only when it names one;
// a subset without a decode engine is ErrNoEngine.
func TestDisaggSubsetRestrictsDecodeAndNamedPrefill(t *testing.T) {
	f := disaggFixture(t, nil)
	long := prompt(100, 640)
	f.feed.store(w1(1), long)
	for _, tc := range []struct {
		name            string
		subset          []string
		prefill, decode routing.WorkerID
	}{
		{"decode engines only: the caching prefill engine", []string{endpointOf(4)}, 1, 4},
		{"a prefill engine named", []string{endpointOf(2), endpointOf(3)}, 2, 3},
	} {
		r := f.req(long)
		r.Subset = tc.subset
		dec := f.route(r)
		if dec.Prefill == nil || dec.Prefill.Worker.ID != tc.prefill || dec.Worker.ID != tc.decode {
			t.Fatalf("%s: pair %+v / %v, want prefill %d decode %d", tc.name, dec.Prefill, dec.Worker, tc.prefill, tc.decode)
		}
		dec.Done(nil)
		r.ID += "-select"
		sel, err := f.d.Select(t0ctx, r)
		if err != nil || sel.Prefill == nil || sel.Prefill.Worker.ID != tc.prefill || sel.Worker.ID != tc.decode {
			t.Fatalf("%s: Select %+v, %v", tc.name, sel, err)
		}
	}
	r := f.req(long)
	r.Subset = []string{endpointOf(1)}
	if _, err := f.d.Route(t0ctx, r); !errors.Is(err, ErrNoEngine) {
		t.Errorf("a subset without a decode engine: %v, want ErrNoEngine", err)
	}
	if n := f.booked(); n != 0 {
		t.Errorf("%d bookings left", n)
	}
}
