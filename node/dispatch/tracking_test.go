package dispatch

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/policyclass"
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

// TestQueuedRequestsBookKeyedIdentities checks that a request admitted
// through the admission queue is booked under the keyed identities, as one
// routed without the queue is: a queued booking and a direct one of the
// same prompt share their blocks in the tracker, as two direct ones do.
func TestQueuedRequestsBookKeyedIdentities(t *testing.T) {
	key, err := routing.NewTrackingKey(bytes.Repeat([]byte{7}, routing.TrackingKeyBytes), "epoch-1")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := policyclass.Parse(nil, policyclass.Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 1, func(c *Config) {
		c.TrackingKey = key
		c.Queue = QueueConfig{Policy: pc, Poll: time.Millisecond}
	})
	long := prompt(1000, 32*testBlockSize)
	queuedDec := f.route(f.req(long)) // through routeQueued
	defer queuedDec.Done(nil)
	one := f.active(w1(1)).DecodeBlocks
	// A direct pass (the one Route takes without a queue) books the same
	// prompt under keyed identities.
	sc := f.d.scratch.Get().(*policy.Scratch)
	defer f.d.scratch.Put(sc)
	r := f.req(long)
	q := f.d.query(r)
	direct, err := f.d.attempt(t0ctx, sc, r, &q, &phases{start: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Done(nil)
	if got := f.active(w1(1)).DecodeBlocks; one != 32 || got != one {
		t.Fatalf("decode blocks %d after the queued request and %d after the direct one, want 32 and 32 (shared blocks)", one, got)
	}
}

// TestOutputTokensAreDecodeLoad: with output-block tracking, the tokens
// the frontend reports through the decision are the engine's decode load,
// in the tracker and in its gauge, until Done; a later report does
// nothing. Without tracking, reports change nothing.
func TestOutputTokensAreDecodeLoad(t *testing.T) {
	for _, track := range []bool{false, true} {
		f := newFixture(t, 1, func(c *Config) { c.Tracking = policy.Tracking{OutputBlocks: track} })
		dec := f.route(f.req(prompt(1, 2*testBlockSize)))
		dec.OnFirstToken()
		for range 10 * testBlockSize {
			dec.OnOutputTokens(1)
		}
		want := int64(2)
		if track {
			want = 12
		}
		gauge := f.m.WorkerActiveDecodeBlocks.WithLabelValues("http://engine-1:8000", "0", "aggregated")
		if got := f.active(w1(1)).DecodeBlocks; got != want {
			t.Fatalf("tracking %v: %d decode blocks after 10 blocks of output, want %d", track, got, want)
		}
		if got := testutil.ToFloat64(gauge); got != float64(want) {
			t.Fatalf("tracking %v: gauge %v, want %d", track, got, want)
		}
		dec.Done(nil)
		dec.OnOutputTokens(testBlockSize)
		if got := f.active(w1(1)); got != (routing.Load{}) {
			t.Fatalf("tracking %v: after Done the engine holds %+v", track, got)
		}
	}
}
