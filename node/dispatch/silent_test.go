package dispatch

import (
	"context"
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// EngineSilent ends the Lost context of every decision booked on that
// engine, and of no other; a decision booked later gets a live one. An
// engine removed without going silent (it deregistered after draining)
// ends nothing.
func TestEngineSilentEndsItsDecisionsOnly(t *testing.T) {
	f := newFixture(t, 2, nil)
	pinned := func(id routing.WorkerID) *Decision {
		r := f.req(prompt(uint32(id)*100, 64))
		r.Pin = &Pin{Engine: id}
		return f.route(r)
	}
	a, b, c := pinned(1), pinned(1), pinned(2)
	f.d.EngineSilent(1)
	for _, dec := range []*Decision{a, b} {
		if err := context.Cause(dec.Lost()); !errors.Is(err, ErrEngineSilent) {
			t.Fatalf("decision on the silent engine: cause %v, want ErrEngineSilent", err)
		}
	}
	if c.Lost().Err() != nil {
		t.Fatal("a decision on the other engine was ended")
	}
	later := pinned(1)
	if later.Lost().Err() != nil {
		t.Fatal("a decision booked after the silence starts out lost")
	}
	f.d.RemoveEngine(2)
	if c.Lost().Err() != nil {
		t.Fatal("removing an engine that deregistered ended its requests")
	}
	for _, dec := range []*Decision{a, b, c, later} {
		dec.Done(nil)
	}
	if (&Decision{}).Lost().Err() != nil {
		t.Fatal("a decision without an engine context is lost")
	}
}
