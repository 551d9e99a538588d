package metrics

import "github.com/prometheus/client_golang/prometheus"

// Rebuilds counts a node's rebuilds of local state it found corrupt, by
// scope: "fsm" when the FSM tables were set aside and rebuilt from the
// member's own raft log and snapshots, "member" when the raft log itself
// was corrupt and the whole member was set aside and rebuilt from its
// peers. Alert on any increase: the disk that held the state deserves a
// look, and the set-aside copy an inspection.
type Rebuilds struct {
	Total *prometheus.CounterVec
}

// NewRebuilds registers the rebuild counter on reg (reusing the one
// already registered there), as a node passes m.Registerer().
func NewRebuilds(reg prometheus.Registerer) *Rebuilds {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_store_rebuilds_total",
		Help: "Rebuilds of local state found corrupt, by scope (fsm: tables rebuilt from the member's own log; member: the whole member rebuilt from its peers)."},
		[]string{"scope"})
	r := &Rebuilds{Total: registerOrReuse(reg, c)}
	for _, s := range []string{"fsm", "member"} {
		r.Total.WithLabelValues(s)
	}
	return r
}

// Rebuilt counts one rebuild of scope.
func (r *Rebuilds) Rebuilt(scope string) {
	if r == nil {
		return
	}
	r.Total.WithLabelValues(scope).Inc()
}
