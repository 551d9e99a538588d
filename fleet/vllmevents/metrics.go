package vllmevents

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus counters of every Subscriber of a process.
// Safe for concurrent use.
type Metrics struct {
	batches    prometheus.Counter
	blocks     *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	gaps       *prometheus.CounterVec
	replays    *prometheus.CounterVec
	replayed   *prometheus.CounterVec
	resyncs    *prometheus.CounterVec
	restarts   prometheus.Counter
	duplicates prometheus.Counter
	skipped    *prometheus.CounterVec
	sink       *prometheus.CounterVec
	sessions   prometheus.Counter
}

// NewMetrics creates the counters and registers them with reg; a nil reg
// leaves them unregistered (tests, or a caller that gathers elsewhere).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_vllmevents_batches_total",
			Help: "Engine KV event batches applied, live or replayed."}),
		blocks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_vllmevents_block_events_total",
			Help: "Blocks stored or removed by applied engine events, and clears, by kind."}, []string{"kind"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_vllmevents_rejected_total",
			Help: "Engine messages, batches or events refused, by reason."}, []string{"reason"}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_vllmevents_gaps_total",
			Help: "Sequence gaps, by how they were repaired (replay; resync when the replay could not fill them)."}, []string{"repair"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_vllmevents_replays_total",
			Help: "Replay requests, by cause (start, gap, reconnect, resync) and outcome (ok, failed)."}, []string{"cause", "outcome"}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_vllmevents_replayed_batches_total",
			Help: "Batches received from engines' replay sockets, by outcome (applied; duplicate: applied before; dropped: after a hole or while the index was out of step, left to a resync)."}, []string{"outcome"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_vllmevents_resyncs_total",
			Help: "Resyncs of an engine's blocks (cleared, then rebuilt from the engine's whole replay buffer), by reason (start, restart, out_of_step, rolled_over, replay_failed, no_replay, retry)."}, []string{"reason"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_vllmevents_restarts_total",
			Help: "Engine restarts seen as a sequence going back; the engine's blocks were resynced."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_vllmevents_duplicates_total",
			Help: "Live batches dropped because a replay had already delivered them."}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_vllmevents_skipped_events_total",
			Help: "Valid events that cannot be indexed, by reason (group: a sliding-window group; no_tokens: stored blocks without token ids)."}, []string{"reason"}),
		sink: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_vllmevents_sink_errors_total",
			Help: "Events the index refused, by error (unknown_parent, out_of_step, other)."}, []string{"error"}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_vllmevents_connects_total",
			Help: "Connections to engine publishers (the first and every reconnection)."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.batches, m.blocks, m.rejected, m.gaps, m.replays, m.replayed,
		m.resyncs, m.restarts, m.duplicates, m.skipped, m.sink, m.sessions} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}
