package gateway

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/relay/consumer"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// fakeConfirmer answers lookups from a fixed binding table and counts
// them per DC.
type fakeConfirmer struct {
	mu    sync.Mutex
	bound map[string]string // session → dc
	fail  map[string]bool   // dc → unreachable
	asked map[string]int
	next  Confirmer // when set, asked instead of the table
}

func (f *fakeConfirmer) Confirm(ctx context.Context, dc, session string) (bool, error) {
	f.mu.Lock()
	f.asked[dc]++
	next, fail, bound := f.next, f.fail[dc], f.bound[session] == dc
	f.mu.Unlock()
	switch {
	case next != nil:
		return next.Confirm(ctx, dc, session)
	case fail:
		return false, errors.New("unreachable")
	}
	return bound, nil
}

func (f *fakeConfirmer) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.asked {
		n += c
	}
	return n
}

// sessionLane is a session-lane result of dc.
func sessionLane(dc string, present, ready bool, stale time.Duration) consumer.Result {
	r := consumer.Result{Pool: producer.SessionPool(dc), Ready: ready, Staleness: stale}
	if present {
		r.Depth = 1
	}
	return r
}

// lookups reads one outcome counter.
func lookups(m *Metrics, outcome string) float64 {
	return testutil.ToFloat64(m.SessionLookups.WithLabelValues(outcome))
}

func TestSummaryLocator(t *testing.T) {
	remotes := []Remote{{DC: "dc-b"}, {DC: "dc-c"}}
	fresh, stale := time.Second, time.Minute
	tests := []struct {
		name     string
		lanes    []consumer.Result
		bound    string // the DC the session is bound in
		fail     string // an unreachable DC
		wantDC   string
		wantErr  bool
		asked    int
		outcomes map[string]float64
	}{
		{name: "fresh absent lanes skip every lookup",
			lanes: []consumer.Result{sessionLane("dc-b", false, true, fresh), sessionLane("dc-c", false, true, fresh)},
			asked: 0, outcomes: map[string]float64{LookupSkipped: 2}},
		{name: "a present lane is confirmed",
			lanes: []consumer.Result{sessionLane("dc-b", true, true, fresh), sessionLane("dc-c", false, true, fresh)},
			bound: "dc-b", wantDC: "dc-b", asked: 1, outcomes: map[string]float64{LookupSkipped: 1, LookupConfirmed: 1}},
		{name: "a present lane the DC denies is a false positive",
			lanes: []consumer.Result{sessionLane("dc-b", true, true, fresh), sessionLane("dc-c", false, true, fresh)},
			asked: 1, outcomes: map[string]float64{LookupSkipped: 1, LookupFalsePositive: 1}},
		{name: "a missing lane is asked",
			lanes: []consumer.Result{sessionLane("dc-b", false, true, fresh)},
			bound: "dc-c", wantDC: "dc-c", asked: 1, outcomes: map[string]float64{LookupSkipped: 1, LookupUnsummarised: 1}},
		{name: "a stale absent lane is asked",
			lanes: []consumer.Result{sessionLane("dc-b", false, true, stale), sessionLane("dc-c", false, true, fresh)},
			bound: "dc-b", wantDC: "dc-b", asked: 1, outcomes: map[string]float64{LookupSkipped: 1, LookupUnsummarised: 1}},
		{name: "a lane without a snapshot is asked",
			lanes: []consumer.Result{sessionLane("dc-b", false, false, 0), sessionLane("dc-c", false, true, fresh)},
			asked: 1, outcomes: map[string]float64{LookupSkipped: 1, LookupUnsummarised: 1}},
		{name: "an unreachable DC is an error",
			lanes: []consumer.Result{sessionLane("dc-b", true, true, fresh), sessionLane("dc-c", false, true, fresh)},
			fail:  "dc-b", wantErr: true, asked: 1, outcomes: map[string]float64{LookupSkipped: 1, LookupFailed: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := &fakeRemote{}
			idx.set(tt.lanes...)
			conf := &fakeConfirmer{bound: map[string]string{"s": tt.bound}, fail: map[string]bool{tt.fail: true}, asked: map[string]int{}}
			loc, err := NewSummaryLocator(SummaryLocatorConfig{Remotes: remotes, Homes: NewHomes("dc-a", "dc-b", "dc-c"),
				Index: idx, Confirm: conf, MaxStaleness: 5 * time.Second, Now: time.Now})
			if err != nil {
				t.Fatal(err)
			}
			m := NewMetrics(nil)
			loc.SetMetrics(m)
			dc, ok, err := loc.Locate(context.Background(), "s")
			if (err != nil) != tt.wantErr || dc != tt.wantDC || ok != (tt.wantDC != "") {
				t.Fatalf("Locate = %q %v %v, want %q (error %v)", dc, ok, err, tt.wantDC, tt.wantErr)
			}
			if conf.calls() != tt.asked {
				t.Fatalf("%d lookups, want %d", conf.calls(), tt.asked)
			}
			for _, o := range []string{LookupSkipped, LookupConfirmed, LookupFalsePositive, LookupUnsummarised, LookupFailed} {
				if got := lookups(m, o); got != tt.outcomes[o] {
					t.Errorf("%s = %v, want %v", o, got, tt.outcomes[o])
				}
			}
		})
	}
}

// TestSummaryLocatorTwoBindings: when both asked DCs hold a binding, the
// home ranking settles it, as HTTPLocator does.
func TestSummaryLocatorTwoBindings(t *testing.T) {
	idx := &fakeRemote{}
	idx.set(sessionLane("dc-b", true, true, 0), sessionLane("dc-c", true, true, 0))
	homes := NewHomes("dc-a", "dc-b", "dc-c")
	conf := &fakeConfirmer{asked: map[string]int{}}
	conf.next = confirmFunc(func(context.Context, string, string) (bool, error) { return true, nil })
	loc, _ := NewSummaryLocator(SummaryLocatorConfig{Remotes: []Remote{{DC: "dc-b"}, {DC: "dc-c"}}, Homes: homes,
		Index: idx, Confirm: conf, Now: time.Now})
	dc, ok, err := loc.Locate(context.Background(), "s")
	if want := homes.Prefer("s", "dc-b", "dc-c"); err != nil || !ok || dc != want {
		t.Fatalf("Locate = %q %v %v, want %s", dc, ok, err, want)
	}
}

type confirmFunc func(context.Context, string, string) (bool, error)

func (f confirmFunc) Confirm(ctx context.Context, dc, s string) (bool, error) { return f(ctx, dc, s) }

// TestSummaryLocatorCache: an answer that took a lookup is cached (so a
// bound session costs one confirming lookup per positive TTL), one from
// the summaries alone is not, and an error is not.
func TestSummaryLocatorCache(t *testing.T) {
	now := time.Unix(1000, 0)
	idx := &fakeRemote{}
	idx.set(sessionLane("dc-b", true, true, 0))
	conf := &fakeConfirmer{bound: map[string]string{"s": "dc-b"}, asked: map[string]int{}, fail: map[string]bool{}}
	loc, _ := NewSummaryLocator(SummaryLocatorConfig{Remotes: []Remote{{DC: "dc-b"}}, Homes: NewHomes("dc-a", "dc-b"),
		Index: idx, Confirm: conf, Now: func() time.Time { return now }, PositiveTTL: 2 * time.Second})
	ctx := context.Background()
	for range 3 {
		if dc, ok, _ := loc.Locate(ctx, "s"); !ok || dc != "dc-b" {
			t.Fatal("bound session not located")
		}
	}
	if conf.calls() != 1 {
		t.Fatalf("%d lookups for three requests within the TTL, want 1", conf.calls())
	}
	now = now.Add(2 * time.Second)
	idx.set(sessionLane("dc-b", false, true, 0)) // unbound there since
	if _, ok, _ := loc.Locate(ctx, "s"); ok || conf.calls() != 1 {
		t.Fatalf("after the TTL: located %v with %d lookups, want absent from the summary alone", ok, conf.calls())
	}
	idx.set(sessionLane("dc-b", true, true, 0))
	conf.fail["dc-b"] = true
	if _, _, err := loc.Locate(ctx, "s"); err == nil {
		t.Fatal("unreachable DC gave no error")
	}
	if _, _, hit := loc.cache.get("s"); hit {
		t.Fatal("an error was cached")
	}
}

func TestSummaryLocatorConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  SummaryLocatorConfig
	}{
		{name: "no index", cfg: SummaryLocatorConfig{Confirm: &fakeConfirmer{}, Now: time.Now}},
		{name: "no confirmer", cfg: SummaryLocatorConfig{Index: &fakeRemote{}, Now: time.Now}},
		{name: "no clock", cfg: SummaryLocatorConfig{Index: &fakeRemote{}, Confirm: &fakeConfirmer{}}},
		{name: "negative staleness", cfg: SummaryLocatorConfig{Index: &fakeRemote{}, Confirm: &fakeConfirmer{}, Now: time.Now, MaxStaleness: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewSummaryLocator(tt.cfg); !errors.Is(err, ErrLocatorConfig) {
				t.Fatalf("err %v, want ErrLocatorConfig", err)
			}
		})
	}
}

// TestSummaryLocatorThroughGateways: with session summaries, a session
// bound in dc-b is forwarded there after one confirming lookup, and a new
// session that no summary holds goes to its home without any lookup.
func TestSummaryLocatorThroughGateways(t *testing.T) {
	summaries := &fakeRemote{}
	var conf *fakeConfirmer
	var loc *SummaryLocator
	a, b := federation(t, time.Millisecond, func(c *Config) {
		if c.DC != "dc-a" {
			return
		}
		conf = &fakeConfirmer{asked: map[string]int{},
			next: NewHTTPLocator(c.Remotes, NewHomes("dc-a", "dc-b"), nil, time.Now, 0, 0)}
		loc, _ = NewSummaryLocator(SummaryLocatorConfig{Remotes: c.Remotes, Homes: NewHomes("dc-a", "dc-b"),
			Index: summaries, Confirm: conf, Now: time.Now})
		c.Sessions = loc
	})
	loc.SetMetrics(a.gw.Metrics())
	body := `{"model":"shared","prompt":"hi"}`

	bound := sessionHomed(t, "dc-a") // bound outside its home: only the summary finds it
	b.nodes[0].bind(bound)
	summaries.set(sessionLane("dc-b", true, true, 0))
	for range 2 {
		if _, h, _ := post(t, a.srv.URL, "/v1/completions", body, map[string]string{"X-Session-Id": bound}); h.Get(DCHeader) != "dc-b" {
			t.Fatalf("session bound in dc-b served by %q", h.Get(DCHeader))
		}
	}
	if conf.calls() != 1 || lookups(a.gw.Metrics(), LookupConfirmed) != 1 {
		t.Fatalf("%d lookups (%v confirmed) for a bound session's two requests, want 1", conf.calls(), lookups(a.gw.Metrics(), LookupConfirmed))
	}

	summaries.set(sessionLane("dc-b", false, true, 0))
	for _, home := range []string{"dc-a", "dc-b"} {
		s := sessionHomed(t, home) + "-new"
		for NewHomes("dc-a", "dc-b").Home(s) != home {
			s += "x"
		}
		_, h, _ := post(t, a.srv.URL, "/v1/completions", body, map[string]string{"X-Session-Id": s})
		if st := h.Get(DCHeader); st != home {
			t.Fatalf("new session homed in %s served by %q", home, st)
		}
	}
	if conf.calls() != 1 || lookups(a.gw.Metrics(), LookupSkipped) != 2 {
		t.Fatalf("new sessions took %d lookups, skipped %v, want none taken and 2 skipped",
			conf.calls()-1, lookups(a.gw.Metrics(), LookupSkipped))
	}
}
