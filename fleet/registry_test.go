package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

func card(id uint64, model string, dp uint32, inc uint64, sum string) *kvrpb.WorkerCard {
	return &kvrpb.WorkerCard{EngineId: id, DpSize: dp, Model: model, BlockSize: 16, TotalKvBlocks: 100,
		MaxNumBatchedTokens: 512, EndpointUrl: fmt.Sprintf("http://e%d:80", id), Checksum: sum, Incarnation: inc}
}

var t0 = time.Unix(1000, 0)

func TestRegisterClassifies(t *testing.T) {
	tests := []struct {
		name string
		next *kvrpb.WorkerCard
		want Change
	}{
		{"same card", card(1, "m", 2, 1, "a"), Refreshed},
		{"new checksum", card(1, "m", 2, 1, "b"), Updated},
		{"new incarnation", card(1, "m", 2, 2, "a"), Restarted},
		{"new rank count", card(1, "m", 3, 1, "a"), Restarted},
		{"other engine", card(2, "m", 2, 1, "a"), Added},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(time.Second, nil)
			var removed []Engine
			r.OnRemove(func(e Engine) { removed = append(removed, e) })
			if c, err := r.Register(card(1, "m", 2, 1, "a"), t0); err != nil || c != Added {
				t.Fatalf("first: %v %v", c, err)
			}
			got, err := r.Register(tc.next, t0.Add(time.Millisecond))
			if err != nil || got != tc.want {
				t.Fatalf("got %v %v, want %v", got, err, tc.want)
			}
			if (tc.want == Restarted) != (len(removed) == 1) {
				t.Fatalf("OnRemove calls %d for %v", len(removed), got)
			}
			e, _ := r.Engine(routing.WorkerID(tc.next.EngineId))
			if !e.LastSeen.Equal(t0.Add(time.Millisecond)) || e.Checksum != tc.next.Checksum {
				t.Fatalf("engine %+v not refreshed", e)
			}
		})
	}
}

func TestRegisterRejectsInvalidCard(t *testing.T) {
	r := NewRegistry(time.Second, nil)
	if _, err := r.Register(card(0, "m", 1, 1, "a"), t0); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
	if _, err := r.Register(nil, t0); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("nil card: err = %v", err)
	}
	if len(r.Engines()) != 0 {
		t.Fatal("invalid card registered")
	}
}

// TestRegisterDisaggRoles: a card's worker_type becomes its ranks' role
// and its bootstrap port the engine's; an unknown worker_type is refused
// with a clear error and registers nothing.
func TestRegisterDisaggRoles(t *testing.T) {
	r := NewRegistry(time.Second, nil)
	p := card(1, "m", 1, 1, "a")
	p.WorkerType, p.BootstrapPort = "prefill", 8998
	d := card(2, "m", 1, 1, "a")
	d.WorkerType = "decode"
	for _, c := range []*kvrpb.WorkerCard{p, d} {
		if _, err := r.Register(c, t0); err != nil {
			t.Fatal(err)
		}
	}
	ws := r.Workers("m")
	if len(ws) != 2 || ws[0].Role != routing.RolePrefill || ws[1].Role != routing.RoleDecode {
		t.Fatalf("workers %+v", ws)
	}
	if port, ok := r.BootstrapPort(1); !ok || port != 8998 {
		t.Fatalf("bootstrap port %d %v", port, ok)
	}
	bad := card(3, "m", 1, 1, "a")
	bad.WorkerType = "prefil"
	_, err := r.Register(bad, t0)
	if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), `"prefil"`) {
		t.Fatalf("unknown worker type: err = %v", err)
	}
	if _, ok := r.Engine(3); ok {
		t.Fatal("a card with an unknown worker type was registered")
	}
}

func TestHeartbeatRules(t *testing.T) {
	r := NewRegistry(time.Second, nil)
	_, _ = r.Register(card(1, "m", 2, 5, "a"), t0)
	load := []*kvrpb.RankLoad{{Rank: 1, Running: 3, ActivePrefillTokens: 70}, {Rank: 9, Running: 1}}
	tests := []struct {
		name string
		hb   *kvrpb.Heartbeat
		want error
	}{
		{"unknown engine", &kvrpb.Heartbeat{EngineId: 2, CardChecksum: "a", Incarnation: 5}, ErrUnknownEngine},
		{"old incarnation", &kvrpb.Heartbeat{EngineId: 1, CardChecksum: "a", Incarnation: 4}, ErrStaleCard},
		{"other checksum", &kvrpb.Heartbeat{EngineId: 1, CardChecksum: "b", Incarnation: 5}, ErrStaleCard},
		{"accepted", &kvrpb.Heartbeat{EngineId: 1, CardChecksum: "a", Incarnation: 5, Loads: load}, nil},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(time.Duration(i+1) * time.Millisecond)
			if err := r.Heartbeat(tc.hb, now, FromEngine); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			e, _ := r.Engine(1)
			if accepted := e.LastSeen.Equal(now); accepted != (tc.want == nil) {
				t.Fatalf("last seen %v after %v", e.LastSeen, tc.want)
			}
		})
	}
	if l, ok := r.Load(routing.Worker{ID: 1, Rank: 1}); !ok || l.ActiveRequests != 3 || l.PrefillTokens != 70 {
		t.Fatalf("load = %+v %v", l, ok)
	}
}

func TestSweepBoundary(t *testing.T) {
	r := NewRegistry(time.Second, nil)
	_, _ = r.Register(card(2, "m", 1, 1, "a"), t0)
	_, _ = r.Register(card(1, "m", 1, 1, "a"), t0.Add(time.Millisecond))
	if gone := r.Sweep(t0.Add(time.Second-time.Nanosecond), 0); len(gone) != 0 {
		t.Fatalf("swept early: %+v", gone)
	}
	if gone := r.Sweep(t0.Add(time.Second), 0); len(gone) != 1 || gone[0].ID != 2 {
		t.Fatalf("swept %+v, want engine 2", gone)
	}
	if gone := r.Sweep(t0.Add(time.Hour), 0); len(gone) != 1 || gone[0].ID != 1 {
		t.Fatalf("swept %+v, want engine 1", gone)
	}
}

func TestReadAPI(t *testing.T) {
	r := NewRegistry(time.Second, nil)
	_, _ = r.Register(card(3, "b", 1, 1, "a"), t0)
	_, _ = r.Register(card(1, "a", 2, 1, "a"), t0)
	_, _ = r.Register(card(2, "a", 1, 1, "a"), t0)
	ids := func(ws []routing.WorkerInfo) []routing.Worker {
		var out []routing.Worker
		for _, w := range ws {
			out = append(out, w.Worker)
		}
		return out
	}
	want := []routing.Worker{{ID: 1}, {ID: 1, Rank: 1}, {ID: 2}}
	if got := ids(r.Workers("a")); !slices.Equal(got, want) {
		t.Fatalf("workers = %v", got)
	}
	if got := r.Models(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("models = %v", got)
	}
	if u, ok := r.Endpoint(3); !ok || u != "http://e3:80" {
		t.Fatalf("endpoint = %q %v", u, ok)
	}
	es := r.Engines()
	if len(es) != 3 || es[0].ID != 1 || es[2].ID != 3 {
		t.Fatalf("engines = %+v", es)
	}
	es[0].Workers[0].Model = "mutated"
	if r.Workers("a")[0].Model != "a" {
		t.Fatal("Engines returned shared state")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		key    string
	}{
		{"defaults", func(*Config) {}, ""},
		{"dc", func(c *Config) { c.DC = "a.b" }, "dc"},
		{"liveness", func(c *Config) { c.LivenessTimeout = -1 }, "liveness_timeout"},
		{"sweep", func(c *Config) { c.SweepInterval = time.Hour }, "sweep_interval"},
		{"snapshot timeout", func(c *Config) { c.SnapshotTimeout = -1 }, "snapshot_timeout"},
		{"attempts", func(c *Config) { c.SnapshotAttempts = -1 }, "snapshot_attempts"},
		{"buffer", func(c *Config) { c.MaxBufferedEvents = -1 }, "max_buffered_events"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{DC: "dc1"}
			c.EnsureDefaults()
			tc.mutate(&c)
			err := c.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err = %v, want one naming %s", err, tc.key)
			}
		})
	}
}

// OnSilent hears of the engines Sweep expires, before OnRemove does, and
// of no engine that deregistered or restarted.
func TestOnSilentHearsOnlyExpiredEngines(t *testing.T) {
	r := NewRegistry(time.Second, nil)
	var calls []string
	r.OnSilent(func(e Engine) { calls = append(calls, fmt.Sprintf("silent %d", e.ID)) })
	r.OnRemove(func(e Engine) { calls = append(calls, fmt.Sprintf("remove %d", e.ID)) })
	for id := uint64(1); id <= 3; id++ {
		if _, err := r.Register(card(id, "m", 1, 1, "c"), t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := r.Deregister(2, 1, FromEngine); !ok {
		t.Fatal("deregister refused")
	}
	if _, err := r.Register(card(3, "m", 1, 2, "c"), t0); err != nil { // a restart
		t.Fatal(err)
	}
	r.Sweep(t0.Add(2*time.Second), 0)
	want := []string{"remove 2", "remove 3", "silent 1", "remove 1", "silent 3", "remove 3"}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
}

// Silence counts only while the node listens: the time the node reports
// it was paused is not held against the engines, and an engine that stays
// silent afterwards still expires a liveness timeout later.
func TestSweepDoesNotCountTheNodesOwnPause(t *testing.T) {
	r := NewRegistry(3*time.Second, nil)
	for id := uint64(1); id <= 2; id++ {
		if _, err := r.Register(card(id, "m", 1, 1, "c"), t0); err != nil {
			t.Fatal(err)
		}
	}
	r.Sweep(t0.Add(250*time.Millisecond), 0)
	// Paused for 4 s: longer than the liveness timeout.
	if gone := r.Sweep(t0.Add(4250*time.Millisecond), 4*time.Second); len(gone) != 0 {
		t.Fatalf("the node's own pause expired %d engines", len(gone))
	}
	// The queued heartbeat of engine 1 arrives; engine 2 stays silent.
	if err := r.Heartbeat(&kvrpb.Heartbeat{EngineId: 1, Incarnation: 1, CardChecksum: "c"}, t0.Add(4300*time.Millisecond), FromEngine); err != nil {
		t.Fatal(err)
	}
	var gone []Engine
	for at := 4500 * time.Millisecond; at <= 7500*time.Millisecond && len(gone) == 0; at += 250 * time.Millisecond {
		gone = r.Sweep(t0.Add(at), 0)
	}
	if len(gone) != 1 || gone[0].ID != 2 {
		t.Fatalf("expired %v after the pause, want engine 2 alone", gone)
	}
	if gone := r.Sweep(t0.Add(time.Hour), 0); len(gone) != 1 || gone[0].ID != 1 {
		t.Fatalf("expired %v an hour later, want engine 1", gone)
	}
}
