package policyclass

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/queue"
)

func frac(v float64) *float64 { return &v }

func load(t *testing.T) *Config {
	t.Helper()
	c, err := Load("testdata/two-classes.yaml", Defaults{ThresholdFrac: frac(2), MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestProfiles(t *testing.T) {
	c := load(t)
	tests := []struct {
		name, model, profile string
		classes              []string
	}{
		{"exact model profile", "small-model", "small-model", []string{"only"}},
		{"root for other models", "big-model", "", []string{"batch", "premium-long", "premium-short", "standard"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := c.For(tc.model)
			if p.Name != tc.profile || strings.Join(p.ClassNames(), ",") != strings.Join(tc.classes, ",") {
				t.Fatalf("got profile %q classes %v", p.Name, p.ClassNames())
			}
		})
	}
	none, _ := Parse(nil, Defaults{ThresholdFrac: frac(0.5)})
	p := none.For("any")
	if p.Name != "synthetic" || len(p.Classes) != 1 || *p.Classes[0].Thresholds.ActivePrefillTokensFrac != 0.5 {
		t.Fatalf("synthetic fallback: %+v", p)
	}
}

func TestClassify(t *testing.T) {
	p := load(t).For("m")
	idx := map[string]int{}
	for i, n := range p.ClassNames() {
		idx[n] = i
	}
	tests := []struct {
		name, header string
		isl, cached  int
		want         string
		fallback     bool
	}{
		{"family short bucket", "premium", 1000, 0, "premium-short", false},
		{"family long bucket", "premium", 10000, 0, "premium-long", false},
		{"bucket by uncached ISL", "premium", 10000, 8000, "premium-short", false},
		{"exactly at a floor", "premium", 4096, 0, "premium-long", false},
		{"explicit class", "batch", 10000, 0, "batch", false},
		{"no header: default family", "", 10, 0, "standard", false},
		{"unknown: default family", "gold", 10, 0, "standard", true},
		{"mapped physical class: default family", "premium-long", 10, 0, "standard", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Classify(tc.header, tc.isl, tc.cached)
			if got.Class != idx[tc.want] || got.Fallback != tc.fallback {
				t.Fatalf("got %s fallback %v, want %s %v", p.Classes[got.Class].Name, got.Fallback, tc.want, tc.fallback)
			}
		})
	}
}

func TestResolvedValues(t *testing.T) {
	p := load(t).For("m")
	if p.Order != queue.WSPT || p.Selection == nil || p.Selection.Policy != policy.NameTwoTier ||
		p.Selection.TwoTier.CacheThreshold != 0.6 || p.Selection.TwoTier.BalanceAbsThreshold != 16 ||
		p.Selection.TwoTier.BalanceRelThreshold != 1.1 {
		t.Fatalf("profile %+v selection %+v", p, p.Selection)
	}
	std := p.Classes[3]
	if std.Name != "standard" || std.MaxWait != 30*time.Second || std.RequestsPerWorker != 32 ||
		*std.Thresholds.ActivePrefillTokensFrac != 2 {
		t.Fatalf("standard: %+v", std)
	}
	long := p.Classes[1]
	if *long.Thresholds.ActivePrefillTokens != 16384 || long.MaxWait != time.Minute {
		t.Fatalf("premium-long: %+v", long)
	}
}

func TestErrorsNamePathAndKey(t *testing.T) {
	base, _ := os.ReadFile("testdata/two-classes.yaml")
	tests := []struct {
		name, old, new, want string
	}{
		{"malformed yaml", "queue_policy: wspt", "queue_policy: [wspt", "line"},
		{"unknown key", "quantum: 512", "quantm: 512", "quantm"},
		{"bad quantum", "quantum: 512", "quantum: 0", "classes.standard.quantum"},
		{"bad order", "queue_policy: wspt", "queue_policy: lifo", "queue_policy"},
		{"floors must increase", "floor: 4096", "floor: 0", "families.premium.uncached_isl_buckets[1].floor"},
		{"unknown class in family", "class: standard\nclasses", "class: silver\nclasses", "families.standard.class"},
		{"unknown default family", "default_policy_family: standard", "default_policy_family: x", "default_policy_family"},
		{"negative limit", "request_queue_limit_per_worker: 32", "request_queue_limit_per_worker: -1", "classes.standard.request_queue_limit_per_worker"},
		{"unknown policy", "type: dynamo-two-tier-cost-fn", "type: magic", "worker_selection.aggregated.type"},
		{"unknown param", "cache_threshold: 0.6", "cache_treshold: 0.6", "params.cache_treshold"},
		{"bad param", "cache_threshold: 0.6", "cache_threshold: 2", "cache_threshold"},
		{"profile class", "only: {quantum: 100}", "only: {quantum: -5}", `profiles.small-model.classes.only.quantum`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(string(base), tc.old, tc.new, 1)
			if doc == string(base) {
				t.Fatalf("test edit %q not applied", tc.old)
			}
			_, err := Parse([]byte(doc), Defaults{})
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig naming %q", err, tc.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load("testdata/nope.yaml", Defaults{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v", err)
	}
}

func FuzzParse(f *testing.F) {
	base, _ := os.ReadFile("testdata/two-classes.yaml")
	f.Add(base)
	f.Add([]byte("classes: {a: {quantum: 1}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, Defaults{})
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error without ErrConfig: %v", err)
			}
			return
		}
		p := c.For("m")
		if cl := p.Classify("x", 100, 10); cl.Class < 0 || cl.Class >= len(p.Classes) {
			t.Fatalf("class %d of %d", cl.Class, len(p.Classes))
		}
	})
}
