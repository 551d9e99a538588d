package dispatch

import (
	"bytes"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestKeyedTrackingKeepsIndexAndLoad checks that with a tracking key the
// exact index still finds the cached prefix (it matches public hashes)
// while the tracker books keyed identities: two requests sharing a prompt
// on one engine are de-duplicated exactly as with public hashes.
func TestKeyedTrackingKeepsIndexAndLoad(t *testing.T) {
	key, err := routing.NewTrackingKey(bytes.Repeat([]byte{7}, routing.TrackingKeyBytes), "epoch-1")
	if err != nil {
		t.Fatal(err)
	}
	long := prompt(1000, 32*testBlockSize)
	loads := map[string]routing.Load{}
	for _, tc := range []struct {
		name string
		key  *routing.TrackingKey
	}{{"public", nil}, {"keyed", key}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2, func(c *Config) { c.TrackingKey = tc.key })
			f.feed.store(w1(2), long)
			a := f.route(f.req(long))
			b := f.route(f.req(long))
			defer a.Done(nil)
			defer b.Done(nil)
			if a.Worker != w1(2) || a.CachedBlocks != 32 || b.Worker != w1(2) {
				t.Fatalf("decisions %v/%d and %v, want both on engine 2 with 32 cached blocks", a.Worker, a.CachedBlocks, b.Worker)
			}
			loads[tc.name] = f.active(w1(2))
		})
	}
	if loads["public"] != loads["keyed"] {
		t.Fatalf("booked load differs: public %+v, keyed %+v", loads["public"], loads["keyed"])
	}
}
