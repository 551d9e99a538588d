package vllmevents

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// Stats are one subscriber's counters, for tests and diagnostics; the
// process-wide Metrics count the same things.
type Stats struct {
	Batches, Gaps, Replays, Restarts, Rejected, Duplicates, Connects, Resyncs uint64
}

// counters are a subscriber's Stats, written by Run's goroutine and read
// from any.
type counters struct {
	batches, gaps, replays, restarts atomic.Uint64
	rejected, duplicates, connects   atomic.Uint64
	resyncs                          atomic.Uint64
}

func (c *counters) stats() Stats {
	return Stats{Batches: c.batches.Load(), Gaps: c.gaps.Load(), Replays: c.replays.Load(),
		Restarts: c.restarts.Load(), Rejected: c.rejected.Load(), Duplicates: c.duplicates.Load(),
		Connects: c.connects.Load(), Resyncs: c.resyncs.Load()}
}

// Subscriber follows one engine rank's publisher and feeds its events to
// a Sink. Run owns its goroutines; Stats may be called from any goroutine.
type Subscriber struct {
	cfg     Config
	sink    Sink
	run     RunSink
	gate    GatedSink
	m       *Metrics
	log     *slog.Logger
	dec     *Decoder
	conv    *Converter
	replay  replayer
	batch   Batch
	started atomic.Bool
	now     func() time.Time

	seq sequence
	// ids is the id of the last event given to the sink.
	ids uint64
	// lastPayload is XXH3 of the last batch applied, which tells a
	// replay of it from a restarted engine's batch of the same number.
	lastPayload uint64
	// dirty says whether the sink may hold blocks of this worker that a
	// clear has not removed; it spares repeated clears.
	dirty bool
	// lost says that the sink refused an event as out of step: its cursor
	// moved under the subscriber (the engine expired and its blocks were
	// dropped; a new raft leader holds another cursor). Nothing more is
	// applied until a resync.
	lost bool
	// retry is set while the last resync could not replay the engine's
	// buffer, so that the worker may lack blocks the engine holds.
	retry retry
	// open is the gate's state at the last check (GatedSink).
	open bool

	n counters
}

// replayer fetches the batches from one sequence number on and calls fn
// with each, in order; it returns after the end marker.
type replayer func(ctx context.Context, from uint64, fn func(seq uint64, payload []byte)) error

// New returns a subscriber for cfg (completed with defaults and validated)
// that applies events to sink and counts in m (nil: counters of its own).
func New(cfg Config, sink Sink, m *Metrics, log *slog.Logger) (*Subscriber, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, fmt.Errorf("%w: nil sink", ErrConfig)
	}
	if m == nil {
		m, _ = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conv, err := NewConverter(cfg.Worker, cfg.BlockSize)
	if err != nil {
		return nil, err
	}
	s := &Subscriber{cfg: cfg, sink: sink, m: m, conv: conv, dec: NewDecoder(), now: time.Now,
		log: log.With("worker", cfg.Worker.String(), "endpoint", cfg.Endpoint)}
	s.run, _ = sink.(RunSink)
	s.gate, _ = sink.(GatedSink)
	if cfg.ReplayEndpoint != "" {
		s.replay = zmqReplayer(cfg.ReplayEndpoint, cfg.ReplayTimeout, cfg.MaxPayloadBytes)
	}
	return s, nil
}

// Stats returns the subscriber's counters.
func (s *Subscriber) Stats() Stats { return s.n.stats() }

// reject counts one piece of bad input.
func (s *Subscriber) reject(reason string, err error, attrs ...any) {
	s.n.rejected.Add(1)
	s.m.rejected.WithLabelValues(reason).Inc()
	s.log.Warn("kv event input refused", append([]any{"reason", reason, "err", err}, attrs...)...)
}

// deliver numbers events and gives them to the sink. A sink whose cursor
// moved under the subscriber (another writer, a restored snapshot, a new
// raft leader) refuses them as out of step: the subscriber is then lost,
// applies nothing more and resyncs the worker (Subscriber.settle).
func (s *Subscriber) deliver(events []routing.Event) {
	if s.lost {
		return
	}
	for i := range events {
		s.ids++
		events[i].ID = s.ids
	}
	for i := 0; i < len(events); {
		n, err := s.applyRun(events[i:])
		i += n
		if err == nil {
			continue
		}
		s.sinkError(err)
		if errIsOutOfStep(err) {
			s.lost = true
			return
		}
		i++ // the index consumed the event's id but refused its body
	}
}

// applyRun applies events up to the first error.
func (s *Subscriber) applyRun(events []routing.Event) (int, error) {
	if s.run != nil {
		n, err := s.run.ApplyRun(events)
		if n == 0 && err == nil {
			return 0, fmt.Errorf("vllmevents: the sink took no event of a run")
		}
		return n, err
	}
	for i := range events {
		if err := s.sink.Apply(&events[i]); err != nil {
			return i, err
		}
	}
	return len(events), nil
}
