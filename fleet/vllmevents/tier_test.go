package vllmevents

import (
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestTierOf: every medium name the engines and the reference use maps to
// its tier, case aside, and an unknown one is refused.
func TestTierOf(t *testing.T) {
	for medium, want := range map[string]routing.Tier{
		"": routing.TierDevice, "GPU": routing.TierDevice, "cuda": routing.TierDevice,
		"CPU": routing.TierHost, "CPU_TIER1": routing.TierHost, "cpu_pinned": routing.TierHost,
		"STORAGE": routing.TierDisk, "CPU_TIER2": routing.TierDisk, "nvme": routing.TierDisk,
		"EXTERNAL": routing.TierShared, "SHARED": routing.TierShared, "remote": routing.TierShared, "NETWORK": routing.TierShared,
	} {
		if got, ok := TierOf(medium); !ok || got != want {
			t.Errorf("TierOf(%q) = %v, %v; want %v", medium, got, ok, want)
		}
	}
	if _, ok := TierOf("TAPE"); ok {
		t.Error("TierOf(TAPE) accepted an unknown medium")
	}
}
