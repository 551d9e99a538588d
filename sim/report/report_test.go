package report

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/sim"
	"github.com/kvrouter/kvrouter/traces"
)

func TestWriteHTML(t *testing.T) {
	reqs, err := traces.ReadBytes(traces.MooncakeSynthetic)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := sim.Compare(context.Background(), reqs[:200], []string{sim.Recommended, "round-robin"}, sim.Config{Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteHTML(dir, Inputs{Title: "test", Results: rs}); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ChartTTFT, ChartHits, ChartLoad, ChartOccupancy, ChartShares} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !strings.Contains(string(b), "<svg") {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if n := strings.Count(string(page), "<svg"); n != 5 || strings.Contains(string(page), "<script") || strings.Contains(string(page), "http://") && !strings.Contains(string(page), "xmlns") {
		t.Fatalf("page has %d inline charts", n)
	}
	if err := WriteHTML(dir, Inputs{}); !errors.Is(err, ErrNoResults) {
		t.Fatalf("no results: err = %v", err)
	}
}
