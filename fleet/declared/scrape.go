package declared

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxPageBytes bounds a scraped Prometheus page: an engine's page is tens
// of kilobytes; anything past this is not a metrics page we should parse.
const maxPageBytes = 8 << 20

// Page is what the router reads from an engine's Prometheus page.
type Page struct {
	// Ranks holds each data-parallel rank's figures, by the rank named in
	// the series' engine (vLLM) or dp_rank (SGLang) label; a page without
	// such labels is rank 0's.
	Ranks map[uint32]RankFigures
	// BlockSize and KVBlocks come from vllm:cache_config_info (0 when the
	// page has none).
	BlockSize uint32
	KVBlocks  uint64
	// StartTime is process_start_time_seconds, 0 when absent.
	StartTime float64
}

// RankFigures is one rank's engine-reported load.
type RankFigures struct {
	Running, Waiting float64
	// KVUsage is the share of KV blocks held by requests (0..1); HasUsage
	// says whether the page reported it.
	KVUsage  float64
	HasUsage bool
}

// The families read, per engine kind. Later names win over earlier ones
// where an engine exports both (vLLM renamed gpu_cache_usage_perc).
var (
	runningFamilies = []string{"vllm:num_requests_running", "sglang:num_running_reqs"}
	waitingFamilies = []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs"}
	usageFamilies   = []string{"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc", "sglang:token_usage"}
	rankLabels      = []string{"engine", "dp_rank"}
)

// Scrape fetches and parses an engine's Prometheus page.
func Scrape(ctx context.Context, c *http.Client, url, apiKey string) (*Page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("declared: %s answered %s", url, resp.Status)
	}
	return ParsePage(io.LimitReader(resp.Body, maxPageBytes))
}

// ParsePage parses a Prometheus text page (the classic format engines
// serve) into the figures the router uses. Unknown families are ignored.
func ParsePage(r io.Reader) (*Page, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("declared: metrics page: %w", err)
	}
	pg := &Page{Ranks: map[uint32]RankFigures{}}
	each(fams, runningFamilies, func(rank uint32, v float64) { f := pg.Ranks[rank]; f.Running += v; pg.Ranks[rank] = f })
	each(fams, waitingFamilies, func(rank uint32, v float64) { f := pg.Ranks[rank]; f.Waiting += v; pg.Ranks[rank] = f })
	each(fams, usageFamilies, func(rank uint32, v float64) {
		f := pg.Ranks[rank]
		f.KVUsage, f.HasUsage = min(max(v, 0), 1), true
		pg.Ranks[rank] = f
	})
	if f := fams["process_start_time_seconds"]; f != nil && len(f.Metric) > 0 {
		pg.StartTime = value(f.Metric[0])
	}
	if f := fams["vllm:cache_config_info"]; f != nil && len(f.Metric) > 0 {
		for _, l := range f.Metric[0].Label {
			switch l.GetName() {
			case "block_size":
				n, _ := strconv.ParseUint(l.GetValue(), 10, 32)
				pg.BlockSize = uint32(n)
			case "num_gpu_blocks":
				pg.KVBlocks, _ = strconv.ParseUint(l.GetValue(), 10, 64)
			}
		}
	}
	return pg, nil
}

// each calls f with every series of the named families, by rank.
func each(fams map[string]*dto.MetricFamily, names []string, f func(rank uint32, v float64)) {
	for _, name := range names {
		fam := fams[name]
		if fam == nil {
			continue
		}
		for _, m := range fam.Metric {
			f(rankOf(m), value(m))
		}
	}
}

func rankOf(m *dto.Metric) uint32 {
	for _, l := range m.Label {
		for _, name := range rankLabels {
			if l.GetName() == name {
				if n, err := strconv.ParseUint(l.GetValue(), 10, 32); err == nil {
					return uint32(n)
				}
			}
		}
	}
	return 0
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
