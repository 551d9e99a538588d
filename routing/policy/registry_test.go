package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	want := []string{"device-aware-weighted", "direct", "kv", "kv-ttft", "least-loaded", "power-of-two", "random", "round-robin", "two-tier"}
	if got := Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Names() = %v", got)
	}
	for _, name := range want {
		s, err := New(name, DefaultOptions(rng(1)))
		if err != nil {
			t.Fatalf("New(%q): %v", name, err)
		}
		if s.Name() != name {
			t.Fatalf("New(%q).Name() = %q", name, s.Name())
		}
	}
}

// TestAliases checks the reference's short mode names: each builds the
// selector it abbreviates, under that selector's own name, and is not a
// name of its own.
func TestAliases(t *testing.T) {
	for alias, want := range map[string]string{"rr": NameRoundRobin, "p2c": NamePowerOfTwo} {
		if got := Canonical(alias); got != want {
			t.Fatalf("Canonical(%q) = %q, want %q", alias, got, want)
		}
		s, err := New(alias, DefaultOptions(rng(1)))
		if err != nil || s.Name() != want {
			t.Fatalf("New(%q) = %v, %v; want the %s selector", alias, s, err, want)
		}
		if slices.Contains(Names(), alias) {
			t.Fatalf("Names() lists the alias %q", alias)
		}
	}
	if got := Canonical("kv"); got != NameKV {
		t.Fatalf("Canonical(kv) = %q", got)
	}
	if got := Canonical("lru"); got != "" {
		t.Fatalf("Canonical(lru) = %q, want empty", got)
	}
	if got := strings.Join(Aliases(), ","); got != "p2c,rr" {
		t.Fatalf("Aliases() = %s", got)
	}
}

func TestNewErrors(t *testing.T) {
	_, err := New("lmetric", DefaultOptions(rng(1)))
	var unknown *UnknownPolicyError
	if !errors.As(err, &unknown) || unknown.Name != "lmetric" || !errors.Is(err, ErrUnknownPolicy) ||
		!strings.Contains(err.Error(), `"lmetric"`) {
		t.Fatalf("unknown policy: %v", err)
	}
	for _, name := range []string{NameKV, NameRandom, NamePowerOfTwo} {
		if _, err := New(name, DefaultOptions(nil)); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New(%q) without rand = %v", name, err)
		}
	}
	o := DefaultOptions(rng(1))
	o.TwoTier.BalanceRelThreshold = 0.5
	if _, err := New(NameTwoTier, o); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad two-tier config: %v", err)
	}
}
