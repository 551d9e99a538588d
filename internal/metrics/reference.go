package metrics

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The reference router's metric families, exported beside kvrouter's own
// so that its dashboards and alerts work unchanged. They are not counted
// twice: at each scrape, referenceCollector reads the kvrouter family
// behind each one and re-exports it under the reference name and label
// names, summing the series that the reference's coarser labels merge.
// The per-worker families' worker_type is the engine's role (kvrouter's
// role label: aggregated, prefill or decode). Reference labels kvrouter
// has no value for take a fixed one: the router-wide families' worker_type
// is "aggregated", and router_id and dynamo_namespace are the node id and
// the DC (SetIdentity).

// WorkerTypeAggregated is the worker_type of the router-wide reference
// series.
const WorkerTypeAggregated = "aggregated"

// label says where one reference label's value comes from: a label of
// the kvrouter series (from), or a constant (value), or the identity.
type label struct {
	name, from, value string
	identity          func(*identity) string
}

// mirror is one reference family read from one kvrouter family.
type mirror struct {
	name, help string
	typ        prometheus.ValueType // CounterValue, GaugeValue; histograms are detected
	src        func(m *Metrics) prometheus.Collector
	labels     []label
	// only keeps the kvrouter series whose label from has value.
	only [2]string
	// scale multiplies a histogram's sum and bucket bounds: 1000 for the
	// reference's families in ms read from kvrouter's in seconds (0: 1).
	scale float64
}

// describe makes the descriptors of mirrors, in order.
func describe(mirrors []mirror) []*prometheus.Desc {
	descs := make([]*prometheus.Desc, 0, len(mirrors))
	for _, mr := range mirrors {
		names := make([]string, len(mr.labels))
		for i, l := range mr.labels {
			names[i] = l.name
		}
		descs = append(descs, prometheus.NewDesc(mr.name, mr.help, names, nil))
	}
	return descs
}

// collect sends mirrors' series, described by descs, to ch.
func collect(ch chan<- prometheus.Metric, m *Metrics, id *identity, mirrors []mirror, descs []*prometheus.Desc) {
	for i, mr := range mirrors {
		for _, s := range mr.read(m, id) {
			ch <- s.metric(descs[i], mr.typ)
		}
	}
}

func from(name, src string) label    { return label{name: name, from: src} }
func fixed(name, value string) label { return label{name: name, value: value} }

var (
	routerID  = label{name: "router_id", identity: func(i *identity) string { return i.router }}
	namespace = label{name: "dynamo_namespace", identity: func(i *identity) string { return i.namespace }}
)

// referenceMirrors is the table of reference families; one row each.
var referenceMirrors = []mirror{
	{name: "dynamo_component_router_requests_total", help: "Requests finished by the router, by model.", typ: prometheus.CounterValue,
		src: func(m *Metrics) prometheus.Collector { return m.Requests }, labels: []label{from("model", "model")}},
	{name: "dynamo_component_router_time_to_first_token_seconds", help: "Time to first token through the router.",
		src: func(m *Metrics) prometheus.Collector { return m.TTFT }, labels: []label{from("model", "model")}},
	{name: "dynamo_component_router_inter_token_latency_seconds", help: "Mean time between streamed tokens.",
		src: func(m *Metrics) prometheus.Collector { return m.ITL }, labels: []label{from("model", "model")}},
	{name: "dynamo_component_router_input_sequence_tokens", help: "Prompt tokens per request.",
		src: func(m *Metrics) prometheus.Collector { return m.InputTokens }, labels: []label{from("model", "model")}},
	{name: "dynamo_component_router_output_sequence_tokens", help: "Generated tokens per request.",
		src: func(m *Metrics) prometheus.Collector { return m.OutputTokens }, labels: []label{from("model", "model")}},
	{name: "dynamo_component_router_kv_hit_rate", help: "Predicted share of the prompt cached on the chosen worker (0..1).",
		src: func(m *Metrics) prometheus.Collector { return m.PredictedHitRate }, labels: []label{from("model", "model")}},
	overhead("dynamo_router_overhead_block_hashing_ms", "hashing", "Block hashing time per request, in ms."),
	// kvrouter hashes blocks and chains sequence hashes in one pass: the
	// sequence-hashing family reports that same pass.
	overhead("dynamo_router_overhead_seq_hashing_ms", "hashing", "Sequence hashing time per request (the same pass as block hashing here), in ms."),
	overhead("dynamo_router_overhead_indexer_find_matches_ms", "matching", "Indexer lookup time per request, in ms."),
	overhead("dynamo_router_overhead_scheduling_ms", "scheduling", "Worker selection time per request, in ms."),
	overhead("dynamo_router_overhead_total_ms", "total", "Total routing overhead per request, in ms."),
	worker("dynamo_frontend_worker_active_decode_blocks", "KV blocks held by active requests on the worker.", func(m *Metrics) prometheus.Collector { return m.WorkerActiveDecodeBlocks }),
	worker("dynamo_frontend_worker_active_prefill_tokens", "Prompt tokens routed to the worker and not yet prefilled.", func(m *Metrics) prometheus.Collector { return m.WorkerActivePrefillTokens }),
	{name: "dynamo_component_kv_cache_events_applied", help: "KV cache events applied to the index, by status and event type.", typ: prometheus.CounterValue,
		src: func(m *Metrics) prometheus.Collector { return m.EventsApplied }, labels: []label{from("status", "status"), from("event_type", "kind")}},
}

func overhead(name, phase, help string) mirror {
	return mirror{name: name, help: help, src: func(m *Metrics) prometheus.Collector { return m.Overhead },
		labels: []label{routerID, namespace}, only: [2]string{"phase", phase}, scale: 1000}
}

func worker(name, help string, src func(m *Metrics) prometheus.Collector) mirror {
	return mirror{name: name, help: help, typ: prometheus.GaugeValue, src: src,
		labels: []label{from("worker_id", "worker"), from("dp_rank", "rank"), from("worker_type", "role")}}
}

// identity is the router's name in the reference's labels.
type identity struct{ router, namespace string }

// referenceCollector exports referenceMirrors from m's families.
type referenceCollector struct {
	m     *Metrics
	id    atomic.Pointer[identity]
	descs []*prometheus.Desc
}

func newReferenceCollector(m *Metrics) *referenceCollector {
	c := &referenceCollector{m: m, descs: describe(referenceMirrors)}
	c.id.Store(&identity{})
	return c
}

// SetIdentity names the router in the reference families' router_id and
// dynamo_namespace labels; the node calls it with its id and DC.
func (m *Metrics) SetIdentity(routerID, namespace string) {
	m.reference.id.Store(&identity{router: routerID, namespace: namespace})
}

// Describe implements prometheus.Collector.
func (c *referenceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *referenceCollector) Collect(ch chan<- prometheus.Metric) {
	collect(ch, c.m, c.id.Load(), referenceMirrors, c.descs)
}

// series is one reference series being summed.
type series struct {
	labels  []string
	value   float64
	hist    bool
	count   uint64
	sum     float64
	buckets map[float64]uint64
}

// read collects the kvrouter family and sums its series by reference
// labels.
func (mr *mirror) read(m *Metrics, id *identity) []*series {
	ch := make(chan prometheus.Metric, 64)
	go func() { mr.src(m).Collect(ch); close(ch) }()
	byKey := map[string]*series{}
	var order []string
	for pm := range ch {
		var d dto.Metric
		if pm.Write(&d) != nil {
			continue
		}
		src := map[string]string{}
		for _, lp := range d.GetLabel() {
			src[lp.GetName()] = lp.GetValue()
		}
		if mr.only[0] != "" && src[mr.only[0]] != mr.only[1] {
			continue
		}
		vals := mr.labelValues(src, id)
		key := strings.Join(vals, "\x00")
		s := byKey[key]
		if s == nil {
			s = &series{labels: vals, buckets: map[float64]uint64{}}
			byKey[key] = s
			order = append(order, key)
		}
		s.add(&d, mr.scale)
	}
	slices.Sort(order)
	out := make([]*series, len(order))
	for i, k := range order {
		out[i] = byKey[k]
	}
	return out
}

func (mr *mirror) labelValues(src map[string]string, id *identity) []string {
	vals := make([]string, len(mr.labels))
	for i, l := range mr.labels {
		switch {
		case l.identity != nil:
			vals[i] = l.identity(id)
		case l.from != "":
			vals[i] = src[l.from]
		default:
			vals[i] = l.value
		}
	}
	return vals
}

func (s *series) add(d *dto.Metric, scale float64) {
	if scale == 0 {
		scale = 1
	}
	switch {
	case d.Histogram != nil:
		s.hist = true
		s.count += d.Histogram.GetSampleCount()
		s.sum += d.Histogram.GetSampleSum() * scale
		for _, b := range d.Histogram.GetBucket() {
			s.buckets[b.GetUpperBound()*scale] += b.GetCumulativeCount()
		}
	case d.Counter != nil:
		s.value += d.Counter.GetValue()
	case d.Gauge != nil:
		s.value += d.Gauge.GetValue()
	}
}

func (s *series) metric(desc *prometheus.Desc, typ prometheus.ValueType) prometheus.Metric {
	if s.hist {
		return prometheus.MustNewConstHistogram(desc, s.count, s.sum, s.buckets, s.labels...)
	}
	return prometheus.MustNewConstMetric(desc, typ, s.value, s.labels...)
}
