package vllmevents

import (
	"context"
	"errors"
	"fmt"

	"github.com/zeebo/xxh3"
)

// Causes label kvrouter_vllmevents_replays_total: what a replay request
// was for.
const (
	causeStart     = "start"
	causeReconnect = "reconnect"
	causeGap       = "gap"
	causeResync    = "resync"
)

// errNoReplay is returned by replayEach without a replay endpoint.
var errNoReplay = errors.New("vllmevents: no replay endpoint")

// replayResult is what one replay did for the sequence.
type replayResult uint8

const (
	// replayFilled: the replay answered, and every batch it returned
	// after those already applied continued the sequence.
	replayFilled replayResult = iota + 1
	// replayRolledOver: a batch it returned came after a hole: the
	// engine's buffer no longer holds the batches in between.
	replayRolledOver
	// replayFailed: no complete answer within Config.ReplayTimeout.
	replayFailed
	// replayNone: the engine has no replay endpoint.
	replayNone
)

func (r replayResult) String() string {
	switch r {
	case replayFilled:
		return "filled"
	case replayRolledOver:
		return "rolled_over"
	case replayFailed:
		return "failed"
	}
	return "none"
}

// reason is the resync reason of a replay that could not fill a gap.
func (r replayResult) reason() string {
	switch r {
	case replayFailed:
		return ResyncReplayFailed
	case replayNone:
		return ResyncNoReplay
	}
	return ResyncRolledOver
}

// Outcomes label kvrouter_vllmevents_replayed_batches_total.
const (
	replayedApplied   = "applied"
	replayedDuplicate = "duplicate"
	replayedDropped   = "dropped"
)

// resume catches up after (re)connecting: it finishes a resync that is
// due (the start's, or one whose replay failed), and otherwise replays
// from the last batch applied, which tells the engine's incarnations
// apart: the same engine sends that batch again, byte for byte; a
// restarted one sends another batch under that number, or nothing when
// it has not published that many yet.
func (s *Subscriber) resume(ctx context.Context, cause string) {
	switch {
	case s.retry.pending:
		s.resync(ctx, ResyncRetry)
	case !s.seq.known:
		// Nothing applied since the last clear: the engine's buffer is
		// all there is to learn.
		s.rebuild(ctx, cause)
	default:
		s.reconnected(ctx, cause)
	}
	s.settle(ctx)
}

// reconnected probes the engine after a reconnection and resyncs the
// worker when the engine restarted or its buffer no longer reaches back
// to the last batch applied. A probe that fails changes nothing: the next
// batch shows whether anything was missed.
func (s *Subscriber) reconnected(ctx context.Context, cause string) {
	last := s.seq.next - 1
	same, r := s.probe(ctx, last, cause)
	switch {
	case r == replayFailed:
	case !same:
		s.restarted(fmt.Errorf("the replay from %d does not repeat the last batch applied", last))
		s.rebuild(ctx, causeResync)
	case r == replayRolledOver:
		s.resync(ctx, ResyncRolledOver)
	}
}

// probe replays from batch last, the last one applied, and applies what
// follows it. It reports whether the engine is the same incarnation: it
// repeated batch last byte for byte, or its replay starts after last. A
// different batch under that number, or an empty replay, is a restart;
// that replay's batches are left for the resync.
func (s *Subscriber) probe(ctx context.Context, last uint64, cause string) (bool, replayResult) {
	const (
		none = iota
		same
		restarted
	)
	state, hole := none, false
	err := s.replayEach(ctx, last, cause, func(seq uint64, payload []byte) {
		if state == none {
			state = same
			if seq == last && xxh3.Hash(payload) != s.lastPayload {
				state = restarted
			}
		}
		if state == same {
			s.take(&hole, seq, payload)
		}
	})
	switch {
	case err != nil:
		return true, replayFailed
	case state != same:
		return false, replayFilled
	}
	s.seq.replayed(last)
	if hole {
		return true, replayRolledOver
	}
	return true, replayFilled
}

// replayEach runs one counted replay from sequence from.
func (s *Subscriber) replayEach(ctx context.Context, from uint64, cause string, fn func(uint64, []byte)) error {
	if s.replay == nil {
		return errNoReplay
	}
	s.n.replays.Add(1)
	err := s.replay(ctx, from, fn)
	outcome := "ok"
	if err != nil {
		outcome = "failed"
		s.log.Warn("kv event replay failed", "from", from, "cause", cause, "err", err)
	}
	s.m.replays.WithLabelValues(cause, outcome).Inc()
	return err
}

// replayFrom replays from sequence from and applies the batches that are
// due, in sequence order.
func (s *Subscriber) replayFrom(ctx context.Context, from uint64, cause string) replayResult {
	if s.replay == nil {
		return replayNone
	}
	hole := false
	err := s.replayEach(ctx, from, cause, func(seq uint64, payload []byte) { s.take(&hole, seq, payload) })
	s.seq.replayed(from)
	switch {
	case err != nil:
		return replayFailed
	case hole:
		return replayRolledOver
	}
	return replayFilled
}

// take applies one replayed batch in sequence order. Batches already
// applied are skipped. A batch after a hole sets *hole and ends what the
// replay applies, as does a sink that lost step: a resync fills the rest.
func (s *Subscriber) take(hole *bool, seq uint64, payload []byte) {
	outcome := replayedApplied
	switch {
	case *hole || s.lost:
		outcome = replayedDropped
	case !s.seq.known || seq == s.seq.next:
		s.apply(seq, payload, false)
		if s.lost {
			outcome = replayedDropped
		}
	case seq < s.seq.next:
		outcome = replayedDuplicate
	default:
		*hole, outcome = true, replayedDropped
	}
	s.m.replayed.WithLabelValues(outcome).Inc()
}
