package dispatch

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/routing"
)

// An engine reported unreachable gets no request until the suspect
// timeout has passed, even the one holding the prompt's cached prefix; a
// session bound to it is rebound elsewhere; with every engine suspected,
// Route says so with ErrNoEngine.
func TestUnreachableEngineIsLeftOutForTheSuspectTimeout(t *testing.T) {
	f := newFixture(t, 2, func(c *Config) { c.SuspectTimeout = 2 * time.Second; c.AffinityTTL = time.Minute })
	cached := routing.Worker{ID: 2}
	f.feed.store(cached, prompt(1, 160))
	r := f.req(prompt(1, 160))
	r.SessionID = "s"
	dec := f.route(r)
	if dec.Worker != cached {
		t.Fatalf("first request went to %v, want the caching engine %v", dec.Worker, cached)
	}
	dec.Done(fmt.Errorf("%w: connection refused", ErrEngineUnreachable))
	if n := testutil.ToFloat64(f.m.EngineUnreachable); n != 1 {
		t.Fatalf("unreachable counter %v, want 1", n)
	}
	for i := range 3 {
		r := f.req(prompt(1, 160))
		r.SessionID = "s"
		dec := f.route(r)
		if dec.Worker == cached {
			t.Fatalf("request %d went to the suspected engine", i)
		}
		dec.Done(nil)
	}
	if b, ok, _ := f.d.bindings.Lookup(t0ctx, "s", f.clock.Now()); !ok || b.Worker == cached {
		t.Fatalf("session binding %+v (found %v), want it moved off engine %v", b, ok, cached.ID)
	}
	pinned := f.req(prompt(1, 160))
	pinned.Pin = &Pin{Engine: cached.ID, AnyRank: true}
	if _, err := f.d.Route(t0ctx, pinned); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("pinned to the suspected engine: %v, want ErrNoEngine", err)
	}
	other := f.route(f.req(prompt(900, 160)))
	other.Done(fmt.Errorf("%w: connection refused", ErrEngineUnreachable))
	if _, err := f.d.Route(t0ctx, f.req(prompt(1, 160))); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("every engine suspected: %v, want ErrNoEngine", err)
	}
	f.clock.Advance(2 * time.Second)
	dec = f.route(f.req(prompt(1, 160)))
	defer dec.Done(nil)
	if dec.Worker != cached {
		t.Fatalf("after the suspect timeout the cached prefix went to %v, want %v", dec.Worker, cached)
	}
}

// Other failures reported through Done do not make an engine a suspect.
func TestOtherFailuresDoNotSuspect(t *testing.T) {
	f := newFixture(t, 1, nil)
	dec := f.route(f.req(prompt(1, 64)))
	dec.Done(errors.New("stream cut"))
	dec = f.route(f.req(prompt(1, 64)))
	dec.Done(nil)
	if n := testutil.ToFloat64(f.m.EngineUnreachable); n != 0 {
		t.Fatalf("unreachable counter %v, want 0", n)
	}
}
