package vllmevents

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// fixture is one file of testdata/ (see gen_fixtures.py).
type fixture struct {
	Layout    string   `json:"layout"`
	Releases  string   `json:"releases"`
	BlockSize int      `json:"block_size"`
	Batches   []string `json:"batches"`
	Expect    struct {
		Chains []struct {
			Tokens             []uint32 `json:"tokens"`
			LoRA               string   `json:"lora"`
			Device, Host, Disk int32
		} `json:"chains"`
		Pairs    int            `json:"pairs"`
		Rejected map[string]int `json:"rejected"`
		Skipped  map[string]int `json:"skipped"`
	} `json:"expect"`
}

func loadFixtures(t *testing.T) map[string]fixture {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := map[string]fixture{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx fixture
		if err := json.Unmarshal(data, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[fx.Layout] = fx
	}
	return out
}

// offline is a subscriber fed by hand, without sockets.
func offline(t *testing.T, blockSize int, sink Sink) *Subscriber {
	t.Helper()
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Worker: routing.Worker{ID: 1}, Endpoint: "tcp://127.0.0.1:1", BlockSize: blockSize}, sink, m, testLog())
	if err != nil {
		t.Fatal(err)
	}
	s.reset(ResyncStart)
	return s
}

// TestConformanceFixtures decodes every layout's golden bytes through the
// subscriber into an exact index and checks the index's contents and the
// refusal counters.
func TestConformanceFixtures(t *testing.T) {
	for name, fx := range loadFixtures(t) {
		t.Run(name, func(t *testing.T) {
			idx := index.NewExact()
			s := offline(t, fx.BlockSize, idx)
			for i, h := range fx.Batches {
				payload, err := hex.DecodeString(h)
				if err != nil {
					t.Fatal(err)
				}
				s.handle(context.Background(), uint64(i), payload)
			}
			for _, c := range fx.Expect.Chains {
				hashes, err := routing.BlockHashes(nil, c.Tokens, fx.BlockSize, routing.Seed(c.LoRA, ""))
				if err != nil {
					t.Fatal(err)
				}
				got := routing.Overlap{}
				for _, m := range idx.FindMatches(hashes, nil) {
					got = m.Overlap
				}
				if want := (routing.Overlap{Device: c.Device, Host: c.Host, Disk: c.Disk}); got != want {
					t.Errorf("chain %v (lora %q): overlap %+v, want %+v", c.Tokens[:4], c.LoRA, got, want)
				}
			}
			if got := idx.Stats().Pairs; got != fx.Expect.Pairs {
				t.Errorf("index holds %d blocks, want %d", got, fx.Expect.Pairs)
			}
			for reason, n := range fx.Expect.Rejected {
				if got := testutil.ToFloat64(s.m.rejected.WithLabelValues(reason)); int(got) != n {
					t.Errorf("rejected %s: %v, want %d", reason, got, n)
				}
			}
			if got, want := s.Stats().Rejected, sum(fx.Expect.Rejected); got != uint64(want) {
				t.Errorf("rejected in all %d, want %d", got, want)
			}
			for reason, n := range fx.Expect.Skipped {
				if got := testutil.ToFloat64(s.m.skipped.WithLabelValues(reason)); int(got) != n {
					t.Errorf("skipped %s: %v, want %d", reason, got, n)
				}
			}
		})
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func counterValue(t *testing.T, m *Metrics, reason string) float64 {
	t.Helper()
	return testutil.ToFloat64(m.rejected.WithLabelValues(reason))
}
