package metrics

import (
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Option adjusts New.
type Option func(*Metrics)

// WithConstLabels puts labels on every kvrouter_* series of the set (not
// on the Go runtime and process collectors, which describe the process
// the same way everywhere). A node passes its dc and node names, so that
// series from many nodes can be told apart and summed per DC even where
// the scraper adds no such labels.
func WithConstLabels(labels prometheus.Labels) Option {
	return func(m *Metrics) { m.constLabels = labels }
}

// families remembers every collector registered through Registerer, so
// that the whole catalogue can be listed (docs/metrics.md) and linted
// before a single request has given a vector its first series.
type families struct {
	mu         sync.Mutex
	collectors []prometheus.Collector
}

// registerer registers on the set's registry with its constant labels and
// records what it registered.
type registerer struct{ m *Metrics }

var _ prometheus.Registerer = registerer{}

// Registerer is where components register metrics of their own (such as
// an engine event source): with the set's constant labels, and listed in
// the catalogue.
func (m *Metrics) Registerer() prometheus.Registerer { return registerer{m} }

func (r registerer) Register(c prometheus.Collector) error {
	if err := prometheus.WrapRegistererWith(r.m.constLabels, r.m.Registry).Register(c); err != nil {
		return err
	}
	r.m.families.mu.Lock()
	defer r.m.families.mu.Unlock()
	r.m.families.collectors = append(r.m.families.collectors, c)
	return nil
}

func (r registerer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err) // only at construction, with the names fixed in code
		}
	}
}

func (r registerer) Unregister(c prometheus.Collector) bool {
	return prometheus.WrapRegistererWith(r.m.constLabels, r.m.Registry).Unregister(c)
}

// register registers one of the set's own collectors.
func (m *Metrics) register(c prometheus.Collector) { m.Registerer().MustRegister(c) }

// Prime gives every registered vector one series whose label values are
// the label names in angle brackets, so that a Gather lists every family
// with its labels. It is for catalogues and lint checks on a set built for
// them, never on a live one.
func (m *Metrics) Prime() error {
	m.families.mu.Lock()
	cs := append([]prometheus.Collector(nil), m.families.collectors...)
	m.families.mu.Unlock()
	for _, c := range cs {
		if err := Prime(c); err != nil {
			return err
		}
	}
	return nil
}

// Prime gives one vector (or each vector of a collector that describes
// one family) a series with placeholder label values; other collectors
// are left alone.
func Prime(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	var descs []*prometheus.Desc
	for d := range ch {
		descs = append(descs, d)
	}
	if len(descs) != 1 {
		return nil
	}
	names, err := variableLabels(descs[0])
	if err != nil {
		return err
	}
	values := make([]string, len(names))
	for i, n := range names {
		values[i] = "<" + n + ">"
	}
	switch v := c.(type) {
	case *prometheus.CounterVec:
		v.WithLabelValues(values...)
	case *prometheus.GaugeVec:
		v.WithLabelValues(values...)
	case *prometheus.HistogramVec:
		v.WithLabelValues(values...)
	case *prometheus.SummaryVec:
		v.WithLabelValues(values...)
	}
	return nil
}

// variableLabels reads a descriptor's variable label names. client_golang
// exposes them only through Desc.String ("variableLabels: {a,b}"); label
// names cannot hold ',' or '}', so the list parses unambiguously, and a
// changed format is reported rather than misread.
func variableLabels(d *prometheus.Desc) ([]string, error) {
	s := d.String()
	const key = "variableLabels: {"
	i := strings.LastIndex(s, key)
	if i < 0 || !strings.HasSuffix(s, "}}") {
		return nil, fmt.Errorf("metrics: cannot read the labels of %s", s)
	}
	list := s[i+len(key) : len(s)-2]
	if list == "" {
		return nil, nil
	}
	names := strings.Split(list, ",")
	for i, n := range names {
		names[i] = strings.TrimSuffix(strings.TrimPrefix(n, "c("), ")")
	}
	return names, nil
}
