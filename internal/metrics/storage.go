package metrics

import "github.com/prometheus/client_golang/prometheus"

// Storage is the metric family of a node's durable stores (the raft log
// and the FSM tables): whether a store's disk is full, the writes it
// refused or failed, and the corruption it found. It has the method set
// of store.Observer, so a node passes it to its stores' Options.
type Storage struct {
	// DiskFullGauge is 1 while a store refuses appends because its free space
	// is below the reserve (store.Options.MinFreeBytes), by store ("raft",
	// "fsm"). Alert on it: the node is not ready while it is 1.
	DiskFullGauge *prometheus.GaugeVec
	// WriteErrors counts refused or failed writes by store and kind
	// ("disk_full", "io").
	WriteErrors *prometheus.CounterVec
	// Corruptions counts data found corrupt by checksum or decoding, by
	// store ("raft", "fsm", "snapshot") and kind ("log", "table",
	// "snapshot").
	Corruptions *prometheus.CounterVec
}

// NewStorage registers the storage metrics on reg (reusing those already
// registered there).
func NewStorage(reg prometheus.Registerer) *Storage {
	s := &Storage{
		DiskFullGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kvrouter_store_disk_full",
			Help: "1 while the store refuses appends because its free space is below the reserve, by store (raft, fsm)."},
			[]string{"store"}),
		WriteErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_store_write_errors_total",
			Help: "Writes the store refused or that failed, by store (raft, fsm) and kind (disk_full, io)."},
			[]string{"store", "kind"}),
		Corruptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_store_corruptions_total",
			Help: "Data found corrupt by checksum or decoding, by store (raft, fsm, snapshot) and kind (log, table, snapshot)."},
			[]string{"store", "kind"}),
	}
	s.DiskFullGauge = registerOrReuse(reg, s.DiskFullGauge)
	s.WriteErrors = registerOrReuse(reg, s.WriteErrors)
	s.Corruptions = registerOrReuse(reg, s.Corruptions)
	for _, st := range []string{"raft", "fsm"} {
		s.DiskFullGauge.WithLabelValues(st)
	}
	return s
}

// registerOrReuse registers c, or returns the collector already
// registered under its name.
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev
			}
		}
	}
	return c
}

// DiskFull records a store's disk-full state.
func (s *Storage) DiskFull(store string, full bool) {
	if s == nil {
		return
	}
	v := 0.0
	if full {
		v = 1
	}
	s.DiskFullGauge.WithLabelValues(store).Set(v)
}

// WriteError counts one refused or failed write.
func (s *Storage) WriteError(store, kind string) {
	if s == nil {
		return
	}
	s.WriteErrors.WithLabelValues(store, kind).Inc()
}

// Corruption counts one corruption found.
func (s *Storage) Corruption(store, kind string) {
	if s == nil {
		return
	}
	s.Corruptions.WithLabelValues(store, kind).Inc()
}
