package dispatch

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policyclass"
)

// disaggFixture is a dispatcher over prefill engines 1 and 2 and decode
// engines 3 and 4 of model "m".
func disaggFixture(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	f := newFixture(t, 4, edit)
	f.engines.setRole(1, routing.RolePrefill)
	f.engines.setRole(2, routing.RolePrefill)
	f.engines.setRole(3, routing.RoleDecode)
	f.engines.setRole(4, routing.RoleDecode)
	return f
}

// booked is the number of active bookings of every decision path.
func (f *fixture) booked() int { return f.d.core.Booked() + f.d.pair.Booked() }

// TestDisaggRoutePair: a request of a model with prefill and decode
// engines gets a pair: the prefill engine holding its prefix, a decode
// engine, the prefill engine's bootstrap port; each hop's booking ends
// with its own Done.
func TestDisaggRoutePair(t *testing.T) {
	f := disaggFixture(t, nil)
	f.engines.ports = map[routing.WorkerID]uint32{2: 8998}
	long := prompt(100, 640)
	f.feed.store(w1(2), long)
	dec := f.route(f.req(long))
	if dec.Prefill == nil || dec.Prefill.Worker != w1(2) || dec.Prefill.EndpointURL != "http://engine-2:8000" {
		t.Fatalf("prefill hop %+v, want engine 2", dec.Prefill)
	}
	if dec.Prefill.BootstrapPort != 8998 || dec.CachedBlocks != 640/testBlockSize || dec.Blocks != 640/testBlockSize {
		t.Fatalf("decision %+v, prefill %+v", dec, dec.Prefill)
	}
	if dec.Worker.ID != 3 && dec.Worker.ID != 4 {
		t.Fatalf("decode on %v, want engine 3 or 4", dec.Worker)
	}
	if n := f.booked(); n != 2 {
		t.Fatalf("%d bookings, want one per hop", n)
	}
	dec.Prefill.Done(nil)
	if n := f.booked(); n != 1 {
		t.Fatalf("%d bookings after the prefill hop, want the decode hop's", n)
	}
	dec.OnFirstToken()
	dec.Done(nil)
	if n := f.booked(); n != 0 {
		t.Fatalf("%d bookings after the request", n)
	}
}

// TestDisaggPrefillUnreachableFailsOver: a prefill engine that could not
// be reached is left out, and the request's second Route goes to the
// other prefill engine, even though the first holds the prefix.
func TestDisaggPrefillUnreachableFailsOver(t *testing.T) {
	f := disaggFixture(t, nil)
	long := prompt(100, 640)
	f.feed.store(w1(1), long)
	r := f.req(long)
	dec := f.route(r)
	if dec.Prefill.Worker != w1(1) {
		t.Fatalf("prefill on %v, want the caching engine 1", dec.Prefill.Worker)
	}
	dec.Prefill.Done(fmt.Errorf("%w: connection refused", ErrEngineUnreachable))
	dec.Done(errors.New("prefill failed"))
	r.PrefillFailed = true
	again := f.route(r)
	defer again.Done(nil)
	if again.Prefill == nil || again.Prefill.Worker != w1(2) {
		t.Fatalf("second prefill hop %+v, want engine 2", again.Prefill)
	}
	if n := f.booked(); n != 2 {
		t.Fatalf("%d bookings, want the second pair's two", n)
	}
}

// TestDisaggDecodeFallback: with no prefill engine left, a request is
// served whole on a decode engine, unless its prefill already failed or
// the fallback is off, when it is refused with ErrNoEngine.
func TestDisaggDecodeFallback(t *testing.T) {
	tests := []struct {
		name          string
		fallback      bool
		prefillFailed bool
		suspect       bool
		want          error
	}{
		{name: "prefill engines gone", fallback: true},
		{name: "prefill engines unreachable", fallback: true, suspect: true},
		{name: "prefill already failed", fallback: true, prefillFailed: true, want: ErrNoEngine},
		{name: "fallback off", want: ErrNoEngine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := disaggFixture(t, func(c *Config) { c.DecodeFallback = tc.fallback })
			if tc.suspect {
				for range 2 {
					dec := f.route(f.req(prompt(7, 64)))
					dec.Prefill.Done(fmt.Errorf("%w: refused", ErrEngineUnreachable))
					dec.Done(errors.New("prefill failed"))
				}
			} else {
				f.engines.remove(1)
				f.engines.remove(2)
			}
			r := f.req(prompt(1, 64))
			r.PrefillFailed = tc.prefillFailed
			dec, err := f.d.Route(t0ctx, r)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Route: %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer dec.Done(nil)
			if dec.Prefill != nil || (dec.Worker.ID != 3 && dec.Worker.ID != 4) {
				t.Fatalf("decision on %v with prefill %+v, want a whole request on a decode engine", dec.Worker, dec.Prefill)
			}
		})
	}
}

// TestDisaggPrefillOnlyModelServesNothingWhole: prefill engines alone
// never take a whole request.
func TestDisaggPrefillOnlyModelServesNothingWhole(t *testing.T) {
	f := disaggFixture(t, nil)
	f.engines.remove(3)
	f.engines.remove(4)
	if _, err := f.d.Route(t0ctx, f.req(prompt(1, 64))); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("Route: %v, want ErrNoEngine", err)
	}
}

// TestDisaggSessionBindsDecodeEngine: a session is bound to its decode
// engine and kept there, while its prefill follows the cache.
func TestDisaggSessionBindsDecodeEngine(t *testing.T) {
	f := disaggFixture(t, func(c *Config) { c.AffinityTTL = time.Minute })
	r := f.req(prompt(1, 64))
	r.SessionID = "s"
	dec := f.route(r)
	dec.Prefill.Done(nil)
	dec.OnFirstToken()
	dec.Done(nil)
	bound := dec.Worker
	other := routing.WorkerID(3 - dec.Prefill.Worker.ID)
	f.feed.store(w1(other), prompt(500, 640))
	r2 := f.req(prompt(500, 640))
	r2.SessionID = "s"
	dec2 := f.route(r2)
	defer dec2.Done(nil)
	if dec2.Worker != bound || !dec2.SessionBound || dec2.Prefill.Worker != w1(other) {
		t.Fatalf("second request %v (bound %v) prefilled on %v; want decode %v, prefill %d", dec2.Worker, dec2.SessionBound,
			dec2.Prefill.Worker, bound, other)
	}
}

// TestDisaggBypassesTheQueue: with the admission queue on, a model served
// by role is routed at once.
func TestDisaggBypassesTheQueue(t *testing.T) {
	zero := 0.0
	pc, err := policyclass.Parse(nil, policyclass.Defaults{ThresholdFrac: &zero})
	if err != nil {
		t.Fatal(err)
	}
	f := disaggFixture(t, func(c *Config) { c.Queue = QueueConfig{Policy: pc, Poll: time.Millisecond} })
	dec := f.route(f.req(prompt(1, 64)))
	defer dec.Done(nil)
	if dec.Prefill == nil {
		t.Fatal("no prefill hop with the queue on")
	}
}

// TestDisaggSelectReturnsPair: Select on a model with prefill and decode
// engines returns the pair without booking it: the decode engine, and
// beside it the prefill engine holding the prompt's prefix; with no
// prefill engine left it returns a decode engine alone.
func TestDisaggSelectReturnsPair(t *testing.T) {
	f := disaggFixture(t, nil)
	f.engines.ports = map[routing.WorkerID]uint32{2: 8998}
	long := prompt(100, 640)
	f.feed.store(w1(2), long)
	sel, err := f.d.Select(t0ctx, f.req(long))
	if err != nil {
		t.Fatal(err)
	}
	if sel.Prefill == nil || sel.Prefill.Worker != w1(2) || sel.Prefill.BootstrapPort != 8998 || sel.Prefill.EndpointURL != "http://engine-2:8000" {
		t.Fatalf("prefill %+v", sel.Prefill)
	}
	if (sel.Worker.ID != 3 && sel.Worker.ID != 4) || sel.EndpointURL != fmt.Sprintf("http://engine-%d:8000", sel.Worker.ID) {
		t.Fatalf("decode %v at %s", sel.Worker, sel.EndpointURL)
	}
	if sel.CachedBlocks != 640/testBlockSize || len(sel.Candidates) != 2 {
		t.Fatalf("selection %+v", sel)
	}
	if n := f.booked(); n != 0 {
		t.Fatalf("%d bookings after Select", n)
	}
	f.engines.remove(1)
	f.engines.remove(2)
	sel, err = f.d.Select(t0ctx, f.req(long))
	if err != nil || sel.Prefill != nil || (sel.Worker.ID != 3 && sel.Worker.ID != 4) {
		t.Fatalf("without prefill engines: %+v, %v", sel, err)
	}
}

// TestDisaggPrefillPin: a prefill pin chooses the prefill engine over the
// one caching the prompt, beside a decode pin; a prefill pin naming a
// decode engine is ErrBadRequest; under the direct policy a request with
// both pins is served and one without a prefill pin refused.
func TestDisaggPrefillPin(t *testing.T) {
	f := disaggFixture(t, nil)
	long := prompt(100, 640)
	f.feed.store(w1(1), long)
	r := f.req(long)
	r.PrefillPin, r.Pin = &Pin{Engine: 2, AnyRank: true}, &Pin{Engine: 4, AnyRank: true}
	dec := f.route(r)
	if dec.Prefill == nil || dec.Prefill.Worker != w1(2) || dec.Worker != w1(4) {
		t.Fatalf("pinned pair %+v / %v, want prefill 2 decode 4", dec.Prefill, dec.Worker)
	}
	dec.Done(nil)
	r = f.req(long)
	r.PrefillPin = &Pin{Engine: 3, AnyRank: true}
	if _, err := f.d.Route(t0ctx, r); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a prefill pin on a decode engine: %v, want ErrBadRequest", err)
	}
	direct := disaggFixture(t, func(c *Config) { c.Policy = "direct" })
	r = direct.req(long)
	r.PrefillPin, r.Pin = &Pin{Engine: 1, AnyRank: true}, &Pin{Engine: 3, AnyRank: true}
	dec = direct.route(r)
	if dec.Prefill == nil || dec.Prefill.Worker != w1(1) || dec.Worker != w1(3) {
		t.Fatalf("direct: pair %+v / %v, want prefill 1 decode 3", dec.Prefill, dec.Worker)
	}
	dec.Done(nil)
	r = direct.req(long)
	r.Pin = &Pin{Engine: 3, AnyRank: true}
	if _, err := direct.d.Route(t0ctx, r); !errors.Is(err, ErrBadRequest) {
		t.Errorf("direct without a prefill pin: %v, want ErrBadRequest", err)
	}
}
