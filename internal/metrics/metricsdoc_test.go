package metrics_test

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// docPath is the generated catalogue, from this package's directory.
const docPath = "../../docs/metrics.md"

// TestMetricsDoc fails when docs/metrics.md differs from the catalogue the
// registries hold; KVRTEST_UPDATE_DOCS=1 (or `go generate ./internal/metrics`)
// rewrites it.
func TestMetricsDoc(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(docHeader)
	writeSection(t, &b, "Router node (`kvrouter node`)", catalogue(t).Registry, []string{"dc", "node"})
	writeSection(t, &b, "Relay gateway (`kvrouter relay`)", relayCatalogue(t, "relay-dc1"), []string{"dc", "relay"})
	if os.Getenv("KVRTEST_UPDATE_DOCS") != "" {
		if err := os.WriteFile(docPath, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Fatalf("%s is out of date with the metric registries: run `KVRTEST_UPDATE_DOCS=1 go test ./internal/metrics -run TestMetricsDoc` (or `go generate ./internal/metrics`)", docPath)
	}
}

const docHeader = `# Metrics

<!-- Generated from the metric registries by TestMetricsDoc in internal/metrics; do not edit.
     Rewrite with: KVRTEST_UPDATE_DOCS=1 go test ./internal/metrics -run TestMetricsDoc -->

Every process serves its metrics in the Prometheus text format on ` + "`GET /metrics`" + ` of its
client-facing address (a node's ` + "`--http-addr`" + `, a relay's ` + "`--gateway-addr`" + `). Names follow
` + "`kvrouter_<subsystem>_<thing>_<unit>`" + ` in base units (seconds, tokens, blocks), and the
whole set passes ` + "`promtool check metrics`" + `.

- **Constant labels.** Every ` + "`kvrouter_*`" + ` series of a node carries ` + "`dc`" + ` and ` + "`node`" + `
  (` + "`--dc`" + `, ` + "`--node-id`" + `); every series of a relay carries ` + "`dc`" + ` and ` + "`relay`" + ` (` + "`--dc`" + `,
  ` + "`--name`" + `). They are always on, so that dashboards can sum per DC whatever the scraper adds.
  The Go runtime and process collectors (` + "`go_*`" + `, ` + "`process_*`" + `) carry none.
- **Workers** (` + "`worker`" + ` label) are named by the engine's endpoint URL, which is stable
  across restarts of the engine and of the router; ` + "`rank`" + ` is the data-parallel rank.
- **Predicted vs engine-reported cache hits.** ` + "`kvrouter_router_predicted_kv_hit_ratio`" + ` is
  what the router's index predicted for the chosen engine; ` + "`kvrouter_frontend_engine_kv_hit_ratio`" + `
  is what the engine reported (` + "`usage.prompt_tokens_details.cached_tokens`" + ` / ` + "`prompt_tokens`" + `;
  vLLM reports it with ` + "`--enable-prompt-tokens-details`" + `, and streamed answers only with
  ` + "`stream_options.include_usage`" + `). Both use the same buckets, so
  ` + "`rate(..._sum) / rate(..._count)`" + ` of each compares directly.

Renamed: ` + "`kvrouter_router_overhead_milliseconds`" + ` is now ` + "`kvrouter_router_overhead_seconds`" + `.
`

// writeSection writes one registry's kvrouter_* families as a table.
func writeSection(t *testing.T, b *bytes.Buffer, title string, g prometheus.Gatherer, constLabels []string) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(b, "\n## %s\n\n| metric | type | labels | help |\n|---|---|---|---|\n", title)
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "kvrouter_") {
			continue
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", mf.GetName(), strings.ToLower(mf.GetType().String()),
			labelList(mf, constLabels), strings.ReplaceAll(mf.GetHelp(), "|", `\|`))
	}
}

// labelList names a family's variable labels (the constant ones are
// documented once, above).
func labelList(mf *dto.MetricFamily, constLabels []string) string {
	var names []string
	if len(mf.GetMetric()) > 0 {
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			if !slices.Contains(constLabels, lp.GetName()) {
				names = append(names, "`"+lp.GetName()+"`")
			}
		}
	}
	if len(names) == 0 {
		return "—"
	}
	return strings.Join(names, ", ")
}
