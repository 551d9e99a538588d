package service_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/relay/gateway"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// completeWith sends a session's completion through d's gateway with
// extra headers and returns the DC that served it.
func completeWith(t *testing.T, d *dc, session string, hdr map[string]string) string {
	t.Helper()
	return completeVia(t, d, session, tokens(5, 2*blockSize), hdr)
}

// sessionLane returns d's view of peer's session summary for session.
func sessionLane(d *dc, peer, session string) (ready, present bool, stale time.Duration) {
	hs := []routing.SeqHash{producer.SessionHash(session)}
	for _, r := range d.relay.Consumer().Query(nil, producer.SessionDomain, hs, time.Now()) {
		if r.Pool.DC == peer {
			return r.Ready, r.Depth > 0, r.Staleness
		}
	}
	return false, false, 0
}

// lookupCount reads a gateway's session lookup counter.
func lookupCount(d *dc, outcome string) float64 {
	return testutil.ToFloat64(d.relay.Gateway().Metrics().SessionLookups.WithLabelValues(outcome))
}

// homedIn returns a session id whose home is dc, with prefix.
func homedIn(dc, prefix string) string {
	h := gateway.NewHomes("dca", "dcb")
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); h.Home(id) == dc {
			return id
		}
	}
}

// TestFederationSessionSummaries: a session bound in a (outside its home,
// b) reaches b's relay in a's published session summary, and b's gateway
// forwards its requests to a after one confirming lookup; a new session
// bound nowhere costs no WAN lookup at either gateway once the lanes are
// fresh.
func TestFederationSessionSummaries(t *testing.T) {
	if testing.Short() {
		t.Skip("two DCs with router clusters, relays and engines; run without -short")
	}
	a, b := startFederation(t, 5*time.Millisecond)
	s := homedIn(b.name, "bound")
	// A forwarded request is served where it lands: a binds s although
	// its home is b, the case only a summary or a lookup can find.
	if got := completeWith(t, a, s, map[string]string{gateway.ForwardedHeader: "test"}); got != a.name {
		t.Fatalf("forwarded request served by %q", got)
	}
	waitFor(t, 10*time.Second, "b's lane of a's session summary to list the session", func() bool {
		ready, present, _ := sessionLane(b, a.name, s)
		return ready && present
	})
	confirmed := lookupCount(b, gateway.LookupConfirmed)
	for range 3 {
		if got := completeWith(t, b, s, nil); got != a.name {
			t.Fatalf("session bound in %s served by %q at %s's gateway", a.name, got, b.name)
		}
	}
	if got := lookupCount(b, gateway.LookupConfirmed) - confirmed; got != 1 {
		t.Fatalf("%v confirming lookups for three requests, want 1", got)
	}

	for _, d := range []*dc{a, b} {
		peer := map[string]string{a.name: b.name, b.name: a.name}[d.name]
		waitFor(t, 10*time.Second, d.name+"'s session lane to be fresh", func() bool {
			ready, _, stale := sessionLane(d, peer, "any")
			return ready && stale < gateway.DefaultMaxStaleness
		})
		asked := func() float64 {
			return lookupCount(d, gateway.LookupConfirmed) + lookupCount(d, gateway.LookupFalsePositive) +
				lookupCount(d, gateway.LookupUnsummarised) + lookupCount(d, gateway.LookupFailed)
		}
		before, skipped := asked(), lookupCount(d, gateway.LookupSkipped)
		for _, home := range []string{a.name, b.name} {
			id := homedIn(home, "new-at-"+d.name)
			if got := completeWith(t, d, id, nil); got != home {
				t.Fatalf("new session homed in %s served by %q", home, got)
			}
		}
		if got := asked() - before; got != 0 {
			t.Fatalf("%s's gateway made %v WAN lookups for new sessions", d.name, got)
		}
		if got := lookupCount(d, gateway.LookupSkipped) - skipped; got != 2 {
			t.Fatalf("%s's gateway skipped %v lookups, want 2", d.name, got)
		}
	}
}
