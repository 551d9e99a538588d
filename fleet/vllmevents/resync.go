package vllmevents

import (
	"context"
	"log/slog"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// Reasons label kvrouter_vllmevents_resyncs_total: why the subscriber
// could not follow the engine's history batch by batch and rebuilt the
// worker from the engine instead.
const (
	// ResyncStart: the subscriber starts; the engine's cache predates it.
	ResyncStart = "start"
	// ResyncRestart: the engine restarted (its sequence went back, or the
	// replay of the last batch applied is another batch).
	ResyncRestart = "restart"
	// ResyncOutOfStep: the sink's cursor moved under the subscriber (the
	// engine expired and its blocks were dropped, a new raft leader).
	ResyncOutOfStep = "out_of_step"
	// ResyncRolledOver: a gap's replay did not return every missing
	// batch: the engine's buffer no longer holds them.
	ResyncRolledOver = "rolled_over"
	// ResyncReplayFailed: a gap's replay got no complete answer within
	// Config.ReplayTimeout.
	ResyncReplayFailed = "replay_failed"
	// ResyncNoReplay: a gap, and the engine has no replay endpoint.
	ResyncNoReplay = "no_replay"
	// ResyncRetry: an earlier resync could not replay the engine's buffer.
	ResyncRetry = "retry"
)

// Resync backoff: a resync whose replay fails is tried again after
// Config.Retry, doubling up to maxResyncBackoff, so that a replay socket
// that stays silent costs one ReplayTimeout per backoff, not per batch.
const maxResyncBackoff = 5 * time.Minute

// retry is the schedule of the next resync after one that could not
// replay the engine's buffer.
type retry struct {
	pending bool
	at      time.Time
	backoff time.Duration
}

// resync is the one answer to every history the subscriber cannot follow
// batch by batch: it clears the worker, then applies every batch the
// engine's replay buffer keeps, from its oldest. vLLM has no other dump
// of its cache, so blocks whose batches left the buffer stay unknown; the
// clear keeps the worker from claiming blocks the lost batches removed.
// Without a replay endpoint, or while the replay fails, the worker is
// rebuilt from live batches, and a failed replay is retried (retry).
func (s *Subscriber) resync(ctx context.Context, reason string) {
	s.reset(reason)
	s.rebuild(ctx, causeResync)
}

// reset is resync's first half: it counts and logs the resync, takes the
// event ids over from the sink's cursor, clears the worker there and
// forgets the engine's sequence.
func (s *Subscriber) reset(reason string) {
	s.n.resyncs.Add(1)
	s.m.resyncs.WithLabelValues(reason).Inc()
	level := slog.LevelWarn
	if reason == ResyncStart {
		level = slog.LevelInfo
	}
	from := "replay buffer"
	if s.replay == nil {
		from = "live batches"
	}
	s.log.Log(context.Background(), level, "resyncing engine blocks", "reason", reason, "rebuilt_from", from)
	s.ids, _ = s.sink.Cursor(s.cfg.Worker)
	s.lost, s.dirty = false, true
	s.clear(reason)
	s.seq = sequence{}
}

// rebuild is resync's second half: the replay of the engine's whole
// buffer into the cleared worker, counted under cause.
func (s *Subscriber) rebuild(ctx context.Context, cause string) {
	if s.replay == nil {
		return
	}
	if r := s.replayFrom(ctx, 0, cause); r != replayFilled || s.lost {
		s.retryLater(r)
		return
	}
	s.retry = retry{}
}

// retryLater schedules another resync after a backoff.
func (s *Subscriber) retryLater(r replayResult) {
	b := s.cfg.Retry
	if s.retry.pending {
		b = min(2*s.retry.backoff, maxResyncBackoff)
	}
	s.retry = retry{pending: true, at: s.now().Add(b), backoff: b}
	s.log.Warn("engine blocks may be incomplete: the resync could not replay the engine's buffer",
		"replay", r.String(), "retry_in", b)
}

// settle resyncs a worker whose sink lost step with the subscriber. It
// reports whether it did.
func (s *Subscriber) settle(ctx context.Context) bool {
	if !s.lost {
		return false
	}
	s.resync(ctx, ResyncOutOfStep)
	return true
}

// gateCheck is how often a subscriber of a GatedSink looks at the gate. A
// new raft leader opens it within moments of its election, so this adds
// little to the time its index misses what the gate dropped.
const gateCheck = 250 * time.Millisecond

// checkGate resyncs the worker when the sink's gate opened since the last
// check and the sink's cursor is not the subscriber's: events it numbered
// were dropped at the gate, or never committed.
func (s *Subscriber) checkGate(ctx context.Context) {
	open := s.gate.Accepting()
	opened := open && !s.open
	s.open = open
	if !opened {
		return
	}
	if cur, _ := s.sink.Cursor(s.cfg.Worker); cur != s.ids {
		s.log.Info("the index's cursor is not the subscriber's once its gate opened", "cursor", cur, "ids", s.ids)
		s.lost = true
	}
	s.settle(ctx)
}

// retryDue resyncs the worker again once the backoff of a resync that
// could not replay has passed.
func (s *Subscriber) retryDue(ctx context.Context) {
	if s.retry.pending && !s.now().Before(s.retry.at) {
		s.resync(ctx, ResyncRetry)
	}
}

// clear empties the worker in the sink with an AllBlocksCleared of the
// subscriber's own, unless nothing was applied since the last clear.
func (s *Subscriber) clear(why string) {
	if !s.dirty {
		return
	}
	s.log.Info("clearing engine blocks", "why", why)
	ev := routing.Event{Worker: s.cfg.Worker, Kind: routing.EventCleared, Tier: routing.TierDevice}
	s.deliver([]routing.Event{ev})
	s.dirty = false
}
