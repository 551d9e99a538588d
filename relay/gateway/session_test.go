package gateway

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"pgregory.net/rapid"
)

func TestSessionBoundInOtherDCIsForwardedThere(t *testing.T) {
	a, b := federation(t, time.Millisecond, nil)
	s := sessionHomed(t, "dc-a") // its home is dc-a, but dc-b holds it
	b.nodes[0].bind(s)
	st, h, _ := post(t, a.srv.URL, "/v1/chat/completions",
		`{"model":"shared","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"X-Session-Id": s})
	if st != http.StatusOK || h.Get(DCHeader) != "dc-b" || a.nodes[0].count() != 0 {
		t.Fatalf("status %d dc %q: session bound in dc-b not served there", st, h.Get(DCHeader))
	}
	if got := testutil.ToFloat64(a.gw.metrics.SessionPlacements.WithLabelValues(placeRemoteBinding)); got != 1 {
		t.Fatalf("remote_binding placements = %v", got)
	}
}

func TestSessionPrefixPolicyDoesNotOverrideBinding(t *testing.T) {
	a, b := federation(t, time.Millisecond, costly)
	s := sessionHomed(t, "dc-a")
	a.nodes[0].bind(s)
	a.remote.set(lane("dc-b", 10)) // the policy alone would choose dc-b
	_, h, _ := post(t, a.srv.URL, "/v1/completions", tokensBody("shared", 40, false), map[string]string{"X-Session-Id": s})
	if h.Get(DCHeader) != "dc-a" || b.nodes[0].count() != 0 {
		t.Fatalf("bound session served by %q", h.Get(DCHeader))
	}
}

// TestNewSessionRace sends the first requests of new sessions to both
// gateways at once: every request of a session is served by its home,
// and only the home binds it.
func TestNewSessionRace(t *testing.T) {
	a, b := federation(t, time.Millisecond, nil)
	dcs := map[string]*dcHarness{"dc-a": a, "dc-b": b}
	for _, home := range []string{"dc-a", "dc-b"} {
		s := sessionHomed(t, home)
		var wg sync.WaitGroup
		served := make(chan string, 8)
		for i := range 8 {
			entry := []*dcHarness{a, b}[i%2]
			wg.Go(func() {
				_, h, _ := post(t, entry.srv.URL, "/v1/completions", `{"model":"m","prompt":"x"}`, map[string]string{"X-Session-Id": s})
				served <- h.Get(DCHeader)
			})
		}
		wg.Wait()
		close(served)
		for dc := range served {
			if dc != home {
				t.Fatalf("session homed in %s served by %q", home, dc)
			}
		}
		for name, h := range dcs {
			if h.nodes[0].isBound(s) != (name == home) {
				t.Fatalf("session %s bound in %s = %v", s, name, h.nodes[0].isBound(s))
			}
		}
	}
}

// TestSessionBoundInTwoDCsSettles starts from the state only a fallback
// or a DC-set change can leave (bound in both DCs): the first request at
// each gateway already goes to the preferred DC, and the losing DC's
// binding is dropped by its gateway.
func TestSessionBoundInTwoDCsSettles(t *testing.T) {
	a, b := federation(t, time.Millisecond, nil)
	s := sessionHomed(t, "dc-b")
	a.nodes[0].bind(s)
	b.nodes[0].bind(s)
	for _, entry := range []*dcHarness{a, b, a} {
		_, h, _ := post(t, entry.srv.URL, "/v1/completions", `{"model":"m","prompt":"x"}`, map[string]string{"X-Session-Id": s})
		if h.Get(DCHeader) != "dc-b" {
			t.Fatalf("request at %s served by %q, want the home dc-b", entry.name, h.Get(DCHeader))
		}
	}
	if a.nodes[0].isBound(s) || !b.nodes[0].isBound(s) || a.nodes[0].count() != 0 {
		t.Fatal("the losing binding in dc-a was not dropped, or dc-a served")
	}
}

func TestSessionOwnerDownIs503UnlessFallback(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		a, b := federation(t, time.Millisecond, func(c *Config) { c.SessionFallback = fallback })
		s := sessionHomed(t, "dc-b")
		b.srv.Close()
		st, h, body := post(t, a.srv.URL, "/v1/completions", `{"model":"m","prompt":"x"}`, map[string]string{"X-Session-Id": s})
		if fallback {
			if st != http.StatusOK || h.Get(DCHeader) != "dc-a" {
				t.Fatalf("fallback on: status %d dc %q", st, h.Get(DCHeader))
			}
			continue
		}
		if _, _, code, _ := errorBody(t, body); st != http.StatusServiceUnavailable || code != "session_unavailable" {
			t.Fatalf("fallback off: status %d body %s", st, body)
		}
		if a.nodes[0].count() != 0 {
			t.Fatal("a session was served by a second DC")
		}
	}
}

func TestHomeEndpoint(t *testing.T) {
	a, _ := federation(t, time.Millisecond, nil)
	a.nodes[0].bind("bound one")
	loc := NewHTTPLocator([]Remote{{DC: "dc-a", URL: a.srv.URL}}, NewHomes("dc-a", "dc-b"), nil, time.Now, 0, 0)
	for id, want := range map[string]bool{"bound one": true, "other": false} {
		dc, ok, err := loc.Locate(context.Background(), id)
		if err != nil || ok != want || ok && dc != "dc-a" {
			t.Fatalf("Locate(%q) = %q %v %v", id, dc, ok, err)
		}
	}
}

func TestLocatorCache(t *testing.T) {
	a, _ := federation(t, time.Millisecond, nil)
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	loc := NewHTTPLocator([]Remote{{DC: "dc-a", URL: a.srv.URL}}, NewHomes("dc-a", "dc-b"), nil, clock, 2*time.Second, time.Second)
	ctx := context.Background()
	if _, ok, _ := loc.Locate(ctx, "s"); ok {
		t.Fatal("unbound session located")
	}
	a.nodes[0].bind("s")
	if _, ok, _ := loc.Locate(ctx, "s"); ok {
		t.Fatal("negative answer not cached")
	}
	now = now.Add(time.Second)
	if _, ok, _ := loc.Locate(ctx, "s"); !ok {
		t.Fatal("negative answer outlived its TTL")
	}
	a.nodes[0].deleteBinding("s")
	now = now.Add(1999 * time.Millisecond)
	if _, ok, _ := loc.Locate(ctx, "s"); !ok {
		t.Fatal("positive answer not cached")
	}
	now = now.Add(time.Millisecond)
	if _, ok, _ := loc.Locate(ctx, "s"); ok {
		t.Fatal("positive answer outlived its TTL")
	}
}

func TestLocatorErrorIsNotCached(t *testing.T) {
	a, _ := federation(t, time.Millisecond, nil)
	url := a.srv.URL
	a.srv.Close()
	loc := NewHTTPLocator([]Remote{{DC: "dc-a", URL: url}}, NewHomes("dc-a"), nil, time.Now, time.Hour, time.Hour)
	if _, _, err := loc.Locate(context.Background(), "s"); err == nil {
		t.Fatal("unreachable peer gave no error")
	}
	if _, _, hit := loc.cache.get("s"); hit {
		t.Fatal("an error was cached")
	}
}

func TestHomesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dcs := rapid.SliceOfNDistinct(rapid.StringMatching(`dc-[a-z]{1,4}`), 1, 6, rapid.ID).Draw(t, "dcs")
		s := rapid.String().Draw(t, "session")
		h := NewHomes(dcs...)
		home := h.Home(s)
		perm := rapid.Permutation(dcs).Draw(t, "perm")
		if NewHomes(perm...).Home(s) != home {
			t.Fatal("home depends on the order of the DC names")
		}
		for _, dc := range dcs {
			if h.Prefer(s, dc, home) != home || h.Prefer(s, home, dc) != home {
				t.Fatalf("Prefer does not rank the home %s first over %s", home, dc)
			}
		}
		// Removing a DC other than the home keeps the home.
		if len(dcs) > 1 {
			var rest []string
			for _, dc := range dcs {
				if dc != home && len(rest) == 0 {
					continue
				}
				rest = append(rest, dc)
			}
			if NewHomes(rest...).Home(s) != home {
				t.Fatal("removing another DC moved the home")
			}
		}
	})
}
