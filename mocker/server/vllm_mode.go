package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvrouter/kvrouter/routing"
)

// vllm reports whether the server speaks the vLLM wire.
func (s *Server) vllm() bool { return s.cfg.Protocol == ProtocolVLLM }

// openVLLM binds every rank's publisher and opens the ranks to requests.
func (s *Server) openVLLM() error {
	for i, r := range s.ranks {
		if err := r.vpub.open(); err != nil {
			for _, prev := range s.ranks[:i] {
				prev.vpub.close()
			}
			return err
		}
	}
	for _, r := range s.ranks {
		r.setOpen(true)
	}
	pub, replay := s.ranks[0].vpub.endpoints()
	s.log.Info("mocker started", "ranks", len(s.ranks), "endpoint", s.cfg.EndpointURL, "model", s.cfg.Engine.Model,
		"kv_events", pub, "replay", replay, "protocol", ProtocolVLLM)
	return nil
}

// publishVLLM encodes one Advance's events as one KVEventBatch and
// publishes it. The caller holds r.mu.
func (s *Server) publishVLLM(r *rank, events []routing.Event) {
	ts := float64(s.cfg.Clock().UnixNano()) / 1e9
	payload, err := r.venc.batch(ts, events, r.book)
	if err != nil {
		s.log.Error("encode vllm event batch", "worker", r.worker.String(), "err", err)
		if payload == nil {
			return
		}
	}
	drop := false
	if r.drop.Load() > 0 {
		r.drop.Add(-1)
		drop = true
		s.log.Info("dropping event batch", "worker", r.worker.String(), "first", events[0].ID)
	}
	r.vpub.publish(payload, drop)
}

// KVEventsEndpoints returns rank's bound event and replay endpoints in
// the vLLM-wire mode (replay empty when there is none), as a router's
// engine declaration names them.
func (s *Server) KVEventsEndpoints(rank uint32) (pub, replay string, err error) {
	p, err := s.vllmPublisher(rank)
	if err != nil {
		return "", "", err
	}
	pub, replay = p.endpoints()
	return pub, replay, nil
}

// KVEventTopics returns the topics rank's PUB socket has subscribers for
// in the vLLM-wire mode. A SUB socket's subscription reaches the publisher
// some time after it connects, and a batch published before that is lost
// to it: a test that needs a batch delivered live waits for the
// subscription first. It is a test hook.
func (s *Server) KVEventTopics(rank uint32) ([]string, error) {
	p, err := s.vllmPublisher(rank)
	if err != nil {
		return nil, err
	}
	return p.topics(), nil
}

// ClosePublisher closes rank's vLLM-wire sockets: until OpenPublisher
// binds them again on the same addresses, batches are numbered and kept
// for replay but reach nobody, as a publisher that lost its subscribers
// would look. It is a test hook.
func (s *Server) ClosePublisher(rank uint32) error {
	p, err := s.vllmPublisher(rank)
	if err != nil {
		return err
	}
	p.close()
	return nil
}

// OpenPublisher binds rank's vLLM-wire sockets again after
// ClosePublisher. It is a test hook.
func (s *Server) OpenPublisher(rank uint32) error {
	p, err := s.vllmPublisher(rank)
	if err != nil {
		return err
	}
	return p.open()
}

// vllmPublisher is rank's vLLM-wire publisher.
func (s *Server) vllmPublisher(rank uint32) (*vllmPub, error) {
	if !s.vllm() || int(rank) >= len(s.ranks) {
		return nil, fmt.Errorf("%w: no vllm publisher for rank %d", ErrConfig, rank)
	}
	return s.ranks[rank].vpub, nil
}

// InterceptReplays has rank's replay socket call fn with the first
// sequence number of each request before answering it, from the socket's
// one serving goroutine: fn may block (a slow replay socket, or one that
// answers only after more batches were published) and returns false to
// leave the request unanswered (a silent one). A nil fn answers every
// request again. fn must return before the server stops. It is a test
// hook.
func (s *Server) InterceptReplays(rank uint32, fn func(from uint64) bool) error {
	p, err := s.vllmPublisher(rank)
	if err != nil {
		return err
	}
	if fn == nil {
		p.intercept.Store(nil)
	} else {
		p.intercept.Store(&fn)
	}
	return nil
}

// Dump returns rank's cache as the engine's Dump: the ground truth that a
// subscriber's index is compared with in tests.
func (s *Server) Dump(rank uint32) ([]routing.Event, error) {
	if int(rank) >= len(s.ranks) {
		return nil, fmt.Errorf("%w: rank %d", ErrConfig, rank)
	}
	r := s.ranks[rank]
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eng.Dump().Events, nil
}

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
