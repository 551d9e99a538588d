package vllmevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// handleMessage takes one live SUB message [topic, seq, payload].
func (s *Subscriber) handleMessage(ctx context.Context, frames [][]byte) {
	if len(frames) != 3 || len(frames[1]) != 8 {
		s.reject(ReasonFrames, fmt.Errorf("%d frames", len(frames)))
		return
	}
	if string(frames[0]) != s.cfg.Topic {
		s.reject(ReasonTopic, fmt.Errorf("topic %.64q", frames[0]), "want", s.cfg.Topic)
		return
	}
	s.retryDue(ctx)
	seq, payload := binary.BigEndian.Uint64(frames[1]), frames[2]
	s.handle(ctx, seq, payload)
	if s.settle(ctx) {
		// The batch in hand, unless the resync's replay delivered it; a
		// sink that refuses it again is left for the next batch.
		s.handle(ctx, seq, payload)
	}
}

// handle orders one live batch against the sequence.
func (s *Subscriber) handle(ctx context.Context, seq uint64, payload []byte) {
	switch s.seq.classify(seq) {
	case actFirst, actApply:
		s.apply(seq, payload, true)
	case actDuplicate:
		s.duplicate()
	case actGap:
		s.n.gaps.Add(1)
		s.log.Info("kv event gap", "expected", s.seq.next, "got", seq)
		s.repair(ctx, seq)
		s.applyLive(seq, payload)
	case actRestart:
		s.restarted(fmt.Errorf("sequence %d after %d", seq, s.seq.next-1))
		if seq != 0 {
			s.rebuild(ctx, causeResync)
		}
		s.applyLive(seq, payload)
	}
}

// restarted handles a new engine incarnation: its sequence counts from 0
// again and its cache starts empty, so the worker is resynced (the caller
// replays the new incarnation's buffer, if it published before this
// batch). It is counted as a regression, not as a gap.
func (s *Subscriber) restarted(why error) {
	s.n.restarts.Add(1)
	s.m.restarts.Inc()
	s.reject(ReasonRegression, fmt.Errorf("engine restarted: %w", why))
	s.reset(ResyncRestart)
}

// repair fills the hole before live batch seq by a replay. What the
// replay cannot fill (no replay endpoint, no complete answer, a buffer
// that no longer reaches back) is resynced; a sink that lost step during
// the replay is left to settle.
func (s *Subscriber) repair(ctx context.Context, seq uint64) {
	r := s.replayFrom(ctx, s.seq.next, causeGap)
	if r == replayFilled && s.seq.next < seq {
		r = replayRolledOver // it stopped short of the live batch
	}
	repair := "replay"
	if r != replayFilled || s.lost {
		repair = "resync"
	}
	s.m.gaps.WithLabelValues(repair).Inc()
	if r != replayFilled && !s.lost {
		s.resync(ctx, r.reason())
	}
}

// applyLive applies the live batch that revealed a gap or a restart, once
// the replay or resync is done: the replay may have delivered it already.
func (s *Subscriber) applyLive(seq uint64, payload []byte) {
	switch {
	case s.lost:
	case s.seq.known && seq < s.seq.next:
		s.duplicate()
	case s.seq.known && seq > s.seq.next:
		// The engine's buffer stopped short of a batch it had published:
		// start again from this one rather than skip the hole.
		s.clear("the replay stopped short of the live batch")
		s.seq = sequence{}
		s.apply(seq, payload, true)
	default:
		s.apply(seq, payload, true)
	}
}

// duplicate drops a live batch that a replay already delivered.
func (s *Subscriber) duplicate() {
	s.n.duplicates.Add(1)
	s.m.duplicates.Inc()
}

// apply decodes one batch and gives its events to the sink. A batch that
// does not decode, or names another rank, is dropped whole; refused
// events are dropped alone. Either way the sequence moves past it: the
// engine would send the same bytes again. Nothing is applied while the
// sink is out of step (a resync follows).
func (s *Subscriber) apply(seq uint64, payload []byte, live bool) {
	if s.lost {
		return
	}
	s.seq.applied(seq, live)
	s.lastPayload = xxh3.Hash(payload)
	if len(payload) > s.cfg.MaxPayloadBytes {
		s.reject(ReasonTooLarge, fmt.Errorf("%d bytes", len(payload)), "seq", seq)
		return
	}
	if err := s.dec.Decode(payload, &s.batch); err != nil {
		s.reject(ReasonMalformed, err, "seq", seq)
		return
	}
	b := &s.batch
	if b.HasRank && b.Rank != int64(s.cfg.Worker.Rank) {
		s.reject(ReasonRank, fmt.Errorf("data_parallel_rank %d", b.Rank), "seq", seq)
		return
	}
	for _, r := range b.Rejects {
		s.reject(r.Reason, r.Err, "seq", seq)
	}
	events, rejects, skipped := s.conv.Convert(make([]routing.Event, 0, len(b.Events)), b)
	for _, r := range rejects {
		s.reject(r.Reason, r.Err, "seq", seq)
	}
	for _, reason := range skipped {
		s.m.skipped.WithLabelValues(reason).Inc()
	}
	s.count(events)
	s.deliver(events)
	s.dirty = true
	s.n.batches.Add(1)
	s.m.batches.Inc()
}

// count adds a batch's blocks to the block events metric.
func (s *Subscriber) count(events []routing.Event) {
	var stored, removed, cleared int
	for i := range events {
		stored += len(events[i].Blocks)
		removed += len(events[i].Removed)
		if events[i].Kind == routing.EventCleared {
			cleared++
		}
	}
	for _, c := range []struct {
		kind string
		n    int
	}{{"stored", stored}, {"removed", removed}, {"cleared", cleared}} {
		if c.n > 0 {
			s.m.blocks.WithLabelValues(c.kind).Add(float64(c.n))
		}
	}
}

// sinkError counts an error of the sink.
func (s *Subscriber) sinkError(err error) {
	label := "other"
	switch {
	case errors.Is(err, index.ErrUnknownParent):
		label = "unknown_parent"
	case errIsOutOfStep(err):
		label = "out_of_step"
		s.log.Warn("index cursor moved under the subscriber; resuming from it", "err", err)
	default:
		s.log.Warn("index refused an event", "err", err)
	}
	s.m.sink.WithLabelValues(label).Inc()
}

// errIsOutOfStep reports a sink whose cursor disagrees with the
// subscriber's ids.
func errIsOutOfStep(err error) bool {
	return errors.Is(err, index.ErrGap) || errors.Is(err, index.ErrStale)
}
