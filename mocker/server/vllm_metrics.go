package server

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// vllmCollector exposes each rank's load under vLLM's metric names, so
// that a router scraping engines reads a mocker as it reads vLLM: labels
// model_name and engine (the rank), KV usage as a fraction of the blocks.
// vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc; both are
// served.
type vllmCollector struct {
	s                         *Server
	running, waiting, gpu, kv *prometheus.Desc
	// queries and hits are vLLM's prefix cache counters, in prompt
	// tokens: their ratio is the hit ratio the engine itself reports.
	queries, hits *prometheus.Desc
}

func newVLLMCollector(s *Server) *vllmCollector {
	labels := []string{"model_name", "engine"}
	return &vllmCollector{s: s,
		running: prometheus.NewDesc("vllm:num_requests_running", "Number of requests in model execution batches.", labels, nil),
		waiting: prometheus.NewDesc("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, nil),
		gpu:     prometheus.NewDesc("vllm:gpu_cache_usage_perc", "KV-cache usage; 1 means 100 percent usage (older name).", labels, nil),
		kv:      prometheus.NewDesc("vllm:kv_cache_usage_perc", "KV-cache usage; 1 means 100 percent usage.", labels, nil),
		queries: prometheus.NewDesc("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", []string{"model_name"}, nil),
		hits:    prometheus.NewDesc("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", []string{"model_name"}, nil),
	}
}

func (c *vllmCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.waiting
	ch <- c.gpu
	ch <- c.kv
	ch <- c.queries
	ch <- c.hits
}

func (c *vllmCollector) Collect(ch chan<- prometheus.Metric) {
	model := c.s.cfg.Engine.Model
	ch <- prometheus.MustNewConstMetric(c.queries, prometheus.CounterValue, float64(c.s.prefixQueried.Load()), model)
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(c.s.prefixHit.Load()), model)
	for _, r := range c.s.ranks {
		l, _ := r.load()
		rank := strconv.FormatUint(uint64(r.worker.Rank), 10)
		usage := 0.0
		if l.KVTotalBlocks > 0 {
			usage = float64(l.KVUsedBlocks) / float64(l.KVTotalBlocks)
		}
		for _, g := range []struct {
			d *prometheus.Desc
			v float64
		}{{c.running, float64(l.Running)}, {c.waiting, float64(l.Waiting)}, {c.gpu, usage}, {c.kv, usage}} {
			if m, err := prometheus.NewConstMetric(g.d, prometheus.GaugeValue, g.v, model, rank); err == nil {
				ch <- m
			}
		}
	}
}

// metricsHandler serves the engine's Prometheus page.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newVLLMCollector(s))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
