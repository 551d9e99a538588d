package policy

import (
	"errors"
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
