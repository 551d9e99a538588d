package dispatch

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// TestSharedCreditWithoutSourceIsAnnounced: with the shared-cache credit
// on and no engine reporting a shared tier, the first request logs one
// WARN and later ones none; with a shared-tier block reported, or the
// credit off, nothing is logged.
func TestSharedCreditWithoutSourceIsAnnounced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mult   float64
		shared bool
		warns  int
	}{
		{"no source", 0.5, false, 1},
		{"a shared block", 0.5, true, 0},
		{"credit off", 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			engines, idx := newFakeEngines(), index.NewExact()
			engines.add(1, "m", 1, testBlockSize)
			cfg := DefaultConfig()
			cfg.Now = newFakeClock().Now
			cfg.KV.SharedCacheMultiplier = tc.mult
			d, err := New(cfg, engines, idx, nil, slog.New(slog.NewTextHandler(&buf, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if tc.shared {
				ev := routing.Event{Worker: w1(1), ID: 1, Kind: routing.EventStored, Tier: routing.TierShared,
					Blocks: []routing.StoredBlock{{Engine: 1, Local: 1}}}
				if err := idx.Apply(&ev); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 3 {
				dec, err := d.Route(t0ctx, &Request{ID: string(rune('a' + i)), Model: "m", Tokens: prompt(1, 2*testBlockSize)})
				if err != nil {
					t.Fatal(err)
				}
				dec.Done(nil)
			}
			if n := strings.Count(buf.String(), "shared KV tier"); n != tc.warns {
				t.Fatalf("%d notices, want %d:\n%s", n, tc.warns, buf.String())
			}
		})
	}
}
