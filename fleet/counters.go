package fleet

import (
	"errors"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// Event statuses of the kvrouter_events_applied_total metric.
const (
	statusOK            = "ok"
	statusStale         = "stale"
	statusUnknownParent = "unknown_parent"
	statusMalformed     = "malformed"
	// statusUnregistered counts events of engines (or incarnations) that
	// are not registered; they are dropped.
	statusUnregistered = "unregistered"
	// statusDropped counts buffered events lost to a buffer overflow or a
	// failed resync.
	statusDropped = "dropped"
	// statusStandby counts events a node ignored because its index does
	// not accept writes now (a raft follower: the leader ingests them).
	statusStandby = "standby"
	statusError   = "error"
)

// Resync outcomes of the kvrouter_events_resyncs_total metric.
const (
	outcomeOK        = "ok"
	outcomeError     = "error"
	outcomeDiscarded = "discarded"
)

// Stats are the plane's counters since New, for tests and diagnostics;
// the same figures go to the Prometheus metrics.
type Stats struct {
	// Applied counts events applied to the index (status ok).
	Applied uint64
	// Dropped counts events not applied for any reason but staleness.
	Dropped uint64
	// Malformed counts undecodable messages of any subject.
	Malformed uint64
	// RefusedHeartbeats counts heartbeats of unknown engines or cards.
	RefusedHeartbeats uint64
	// Gaps counts detected gaps; Resyncs completed snapshot resyncs and
	// ResyncErrors failed ones.
	Gaps, Resyncs, ResyncErrors uint64
	// Refused counts engines' messages refused by admission, keyed
	// "message/reason" as the kvrouter_fleet_messages_refused_total labels.
	Refused map[string]uint64
}

// counters feeds Stats and the metrics. Prometheus counters are resolved
// once per label pair so that the per-event cost is a map lookup and an
// atomic add.
type counters struct {
	m                 *metrics.Metrics
	cache             map[[2]string]prometheus.Counter
	appliedN, dropped atomic.Uint64
	malformedN, hbRef atomic.Uint64
	gaps, resyncs     atomic.Uint64
	resyncErrs        atomic.Uint64

	refMu   sync.Mutex
	refused map[string]uint64
}

func newCounters(m *metrics.Metrics) *counters {
	return &counters{m: m, cache: make(map[[2]string]prometheus.Counter)}
}

func (c *counters) stats() Stats {
	return Stats{
		Applied: c.appliedN.Load(), Dropped: c.dropped.Load(), Malformed: c.malformedN.Load(),
		RefusedHeartbeats: c.hbRef.Load(), Gaps: c.gaps.Load(), Resyncs: c.resyncs.Load(),
		ResyncErrors: c.resyncErrs.Load(), Refused: c.refusedCopy(),
	}
}

func (c *counters) refusedCopy() map[string]uint64 {
	c.refMu.Lock()
	defer c.refMu.Unlock()
	return maps.Clone(c.refused)
}

// refuse counts n refused messages of one kind for one reason; any
// goroutine may call it.
func (c *counters) refuse(message, reason string, n int) {
	if n <= 0 {
		return
	}
	c.refMu.Lock()
	if c.refused == nil {
		c.refused = map[string]uint64{}
	}
	c.refused[message+"/"+reason] += uint64(n)
	c.refMu.Unlock()
	if c.m != nil {
		c.m.EngineRefused.WithLabelValues(message, reason).Add(float64(n))
	}
}

// add counts n events of kind with status. Only the applier goroutine
// calls it (the cache is not locked).
func (c *counters) add(kind, status string, n int) {
	switch status {
	case statusOK:
		c.appliedN.Add(uint64(n))
	case statusStale:
	default:
		c.dropped.Add(uint64(n))
	}
	if c.m == nil || n == 0 {
		return
	}
	k := [2]string{kind, status}
	ctr, ok := c.cache[k]
	if !ok {
		ctr = c.m.EventsApplied.WithLabelValues(kind, status)
		c.cache[k] = ctr
	}
	ctr.Add(float64(n))
}

// applied counts one event by the outcome of index.Apply.
func (c *counters) applied(ev *routing.Event, err error) {
	c.add(ev.Kind.String(), applyStatus(err), 1)
}

func applyStatus(err error) string {
	switch {
	case err == nil:
		return statusOK
	case errors.Is(err, index.ErrStale):
		return statusStale
	case errors.Is(err, index.ErrUnknownParent):
		return statusUnknownParent
	case errors.Is(err, routing.ErrBadEvent):
		return statusMalformed
	}
	return statusError
}

// events counts every event of a slice with one status.
func (c *counters) events(evs []routing.Event, status string) {
	for i := range evs {
		c.add(evs[i].Kind.String(), status, 1)
	}
}

// malformed counts one undecodable message; what names the message type.
func (c *counters) malformed(what string) {
	c.malformedN.Add(1)
	if c.m != nil {
		c.m.EventsApplied.WithLabelValues(what, statusMalformed).Inc()
	}
}

func (c *counters) gap() {
	c.gaps.Add(1)
	if c.m != nil {
		c.m.EventGaps.Inc()
	}
}

func (c *counters) resync(outcome string) {
	switch outcome {
	case outcomeOK:
		c.resyncs.Add(1)
	case outcomeError:
		c.resyncErrs.Add(1)
	}
	if c.m != nil {
		c.m.Resyncs.WithLabelValues(outcome).Inc()
	}
}

func (c *counters) refusedHeartbeat() { c.hbRef.Add(1) }
