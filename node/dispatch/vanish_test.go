package dispatch

import (
	"testing"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// vanishingEngines removes the first engine asked for its endpoint, as if it
// left the fleet between the candidate list and the booking.
type vanishingEngines struct {
	*fakeEngines
	gone routing.WorkerID
}

func (v *vanishingEngines) Endpoint(id routing.WorkerID) (string, bool) {
	if v.gone == 0 {
		v.gone = id
		v.remove(id)
		return "", false
	}
	return v.fakeEngines.Endpoint(id)
}

func TestRouteRetriesWhenTheChosenEngineLeaves(t *testing.T) {
	fe := newFakeEngines()
	fe.add(1, "m", 1, testBlockSize)
	fe.add(2, "m", 1, testBlockSize)
	v := &vanishingEngines{fakeEngines: fe}
	cfg := DefaultConfig()
	cfg.Seed = 7
	d, err := New(cfg, v, index.NewExact(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := d.Route(t.Context(), &Request{ID: "r", Model: "m", Tokens: make([]uint32, 4*testBlockSize)})
	if err != nil {
		t.Fatalf("route: %v", err)
	}
	defer dec.Done(nil)
	if v.gone == 0 || dec.Worker.ID == v.gone {
		t.Fatalf("served by %v after engine %d left", dec.Worker, v.gone)
	}
}
