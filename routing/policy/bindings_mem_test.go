package policy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/routing"
)

// testTTL is the idle timeout of the stores under test.
const testTTL = time.Minute

var t0ctx = context.Background()

func newMem(t testing.TB, max int) *MemBindings {
	t.Helper()
	s, err := NewMemBindings(MemConfig{TTL: testTTL, MaxSessions: max})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// modelBinding is the property test's model of one key.
type modelBinding struct {
	w        routing.Worker
	version  uint64
	active   int
	deadline time.Time
}

// TestMemBindingsModel checks MemBindings against a plain model under random
// operations: compare-and-set binds have exactly the model's winner, holds
// and releases move the idle deadline as specified, and expiry matches.
func TestMemBindingsModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newMem(t, 4)
		now := time.Unix(0, 0)
		model := map[string]*modelBinding{}
		versions := []uint64{0}
		keys := rapid.SampledFrom([]string{"a", "b", "c", "d", "e"})
		liveModel := func(k string) *modelBinding {
			b := model[k]
			if b != nil && b.active == 0 && !now.Before(b.deadline) {
				delete(model, k)
				return nil
			}
			return b
		}
		rt.Repeat(map[string]func(*rapid.T){
			"bind": func(rt *rapid.T) {
				k := keys.Draw(rt, "key")
				w := routing.Worker{ID: routing.WorkerID(rapid.IntRange(1, 3).Draw(rt, "w"))}
				expect := rapid.SampledFrom(versions).Draw(rt, "expect")
				got, won, err := s.Bind(t0ctx, k, w, expect, now)
				cur := liveModel(k)
				match := cur == nil && expect == 0 || cur != nil && cur.version == expect
				live := 0
				for kk := range model {
					if liveModel(kk) != nil {
						live++
					}
				}
				if match && cur == nil && live >= 4 {
					if !errors.Is(err, ErrSessionLimit) {
						rt.Fatalf("bind over the limit: %v", err)
					}
					return
				}
				if err != nil || won != match {
					rt.Fatalf("bind %s expect %d: won=%v err=%v, model says %v", k, expect, won, err, match)
				}
				if !won {
					if cur == nil {
						if got != (routing.Binding{}) {
							rt.Fatalf("loser over no binding saw %+v", got)
						}
						return
					}
					if got.Version != cur.version || got.Worker != cur.w {
						rt.Fatalf("loser saw %+v, model %+v", got, cur)
					}
					return
				}
				if got.Worker != w || got.Active != 1 || got.Version <= versions[len(versions)-1] {
					rt.Fatalf("winner %+v", got)
				}
				versions = append(versions, got.Version)
				model[k] = &modelBinding{w: w, version: got.Version, active: 1, deadline: now.Add(testTTL)}
			},
			"acquire": func(rt *rapid.T) {
				k := keys.Draw(rt, "key")
				v := rapid.SampledFrom(versions).Draw(rt, "version")
				ok, _ := s.Acquire(t0ctx, k, v, now)
				cur := liveModel(k)
				want := cur != nil && cur.version == v
				if ok != want {
					rt.Fatalf("acquire %s@%d = %v, want %v", k, v, ok, want)
				}
				if ok {
					cur.active++
				}
			},
			"release": func(rt *rapid.T) {
				k := keys.Draw(rt, "key")
				v := rapid.SampledFrom(versions).Draw(rt, "version")
				_ = s.Release(t0ctx, k, v, now)
				if cur := model[k]; cur != nil && cur.version == v && cur.active > 0 {
					cur.active--
					if cur.active == 0 {
						cur.deadline = now.Add(testTTL)
					}
				}
			},
			"unbind": func(rt *rapid.T) {
				k := keys.Draw(rt, "key")
				_ = s.Unbind(t0ctx, k)
				delete(model, k)
			},
			"advance": func(rt *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(1, 90).Draw(rt, "s")) * time.Second)
			},
			"": func(rt *rapid.T) {
				for _, k := range []string{"a", "b", "c", "d", "e"} {
					got, ok, _ := s.Lookup(t0ctx, k, now)
					cur := liveModel(k)
					if ok != (cur != nil) || ok && (got.Version != cur.version || got.Worker != cur.w || got.Active != cur.active) {
						rt.Fatalf("lookup %s = %+v %v, model %+v", k, got, ok, cur)
					}
				}
			},
		})
	})
}

func TestMemBindingsConcurrentCAS(t *testing.T) {
	s := newMem(t, 100)
	now := time.Unix(0, 0)
	const n = 16
	var wg sync.WaitGroup
	wins := make([]bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, won, err := s.Bind(t0ctx, "k", routing.Worker{ID: routing.WorkerID(i + 1)}, 0, now)
			if err != nil {
				t.Error(err)
			}
			wins[i] = won
		}()
	}
	wg.Wait()
	winners := 0
	for _, w := range wins {
		if w {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d winners of one key, want 1", winners)
	}
}

func TestMemBindingsKeysAndEngines(t *testing.T) {
	s := newMem(t, 10)
	now := time.Unix(0, 0)
	if _, _, err := s.Bind(t0ctx, strings.Repeat("k", 257), routing.Worker{ID: 1}, 0, now); !errors.Is(err, ErrSessionLimit) {
		t.Errorf("long key: %v", err)
	}
	if _, _, err := s.Lookup(t0ctx, "", now); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("empty key: %v", err)
	}
	for i, k := range []string{"a", "b", "c"} {
		if _, _, err := s.Bind(t0ctx, k, routing.Worker{ID: routing.WorkerID(1 + i%2), Rank: uint32(i)}, 0, now); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.InvalidateEngine(t0ctx, 1); n != 2 {
		t.Errorf("invalidated %d bindings of engine 1, want 2", n)
	}
	if _, ok, _ := s.Lookup(t0ctx, "b", now); !ok || s.Len() != 1 {
		t.Errorf("engine 2's binding gone or others left: len %d", s.Len())
	}
	b, _, _ := s.Lookup(t0ctx, "b", now)
	if ok, _ := s.Invalidate(t0ctx, "b", b.Version+1); ok {
		t.Error("invalidated with a wrong version")
	}
	if ok, _ := s.Invalidate(t0ctx, "b", b.Version); !ok || s.Len() != 0 {
		t.Error("invalidate with the right version failed")
	}
}

func TestNewMemBindingsValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  MemConfig
	}{
		{name: "no ttl", cfg: MemConfig{MaxSessions: 1}},
		{name: "no bound", cfg: MemConfig{TTL: time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewMemBindings(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("err %v", err)
			}
		})
	}
}
