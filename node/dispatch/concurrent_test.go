package dispatch

import (
	"fmt"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestConcurrentRoute runs Route, the decision callbacks, Unbind and
// RemoveEngine from many goroutines (run it with -race) and checks that
// every booking is freed.
func TestConcurrentRoute(t *testing.T) {
	f := affinityFixture(t, 8, func(c *Config) { c.PredictTTL = 1e9 })
	shared := prompt(1, 512)
	for i := 1; i <= 4; i++ {
		f.feed.store(w1(routing.WorkerID(i)), shared)
	}
	const goroutines, perG = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				r := &Request{ID: fmt.Sprintf("g%d-%d", g, i), Model: "m",
					Tokens: concat(shared, prompt(uint32(g*1000+i), 64)), SessionID: fmt.Sprint("s", i%5)}
				if i%3 == 0 {
					r.Tokens, r.Text = nil, fmt.Sprintf("%0300d", i)
				}
				dec, err := f.d.Route(t0ctx, r)
				if err != nil {
					t.Error(err)
					return
				}
				dec.OnFirstToken()
				dec.Done(nil)
				if i%17 == 0 {
					_ = f.d.Unbind(t0ctx, r.SessionID)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			f.d.RemoveEngine(99) // an engine that never served: no effect
			_ = f.d.Models()
		}
	}()
	wg.Wait()
	if n := f.d.core.Booked(); n != 0 {
		t.Errorf("%d requests still booked", n)
	}
	for i := 1; i <= 8; i++ {
		b, ok, _ := f.d.bindings.Lookup(t0ctx, fmt.Sprint("s", i%5), f.clock.Now())
		if ok && b.Active != 0 {
			t.Errorf("binding %d still held by %d requests", i%5, b.Active)
		}
	}
}
