package vllmevents

import (
	"context"
	"errors"
	"fmt"

	"github.com/zeebo/xxh3"
)

// errNoReplay is returned by replayEach without a replay endpoint.
var errNoReplay = errors.New("vllmevents: no replay endpoint")

// resume catches up after (re)connecting. At start it replays everything
// the engine still buffers. After a reconnection it replays from the last
// batch applied, which tells the engine's incarnations apart: the same
// engine sends that batch again, byte for byte; a restarted one sends
// another batch under that number, or nothing when it has not published
// that many yet. A restart then clears the worker and replays the new
// incarnation from 0.
func (s *Subscriber) resume(ctx context.Context, cause string) {
	if !s.seq.known || s.seq.next == 0 {
		s.replayFrom(ctx, 0, cause)
		return
	}
	last := s.seq.next - 1
	same, err := s.probe(ctx, last, cause)
	if err != nil || same {
		return
	}
	s.restarted(fmt.Errorf("the replay from %d does not repeat the last batch applied", last))
	s.replayFrom(ctx, 0, "restart")
}

// probe replays from batch last, the last one applied, and applies what
// follows it. It reports whether the engine is the same incarnation: it
// repeated batch last byte for byte, or its replay starts after last (a
// gap that applyReplayed repairs by a clear, whichever incarnation sent
// it). A different batch under that number, or an empty replay, is a
// restart; that replay's batches are left for the replay from 0.
func (s *Subscriber) probe(ctx context.Context, last uint64, cause string) (bool, error) {
	const (
		none = iota
		same
		restarted
	)
	state := none
	err := s.replayEach(ctx, last, cause, func(seq uint64, payload []byte) {
		if state == none {
			state = same
			if seq == last {
				if xxh3.Hash(payload) != s.lastPayload {
					state = restarted
				}
				return
			}
		}
		if state == same {
			s.applyReplayed(seq, payload)
		}
	})
	if err != nil {
		return false, err
	}
	if state == same {
		s.seq.replayed(last)
	}
	return state == same, nil
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
// due. It reports whether the replay started exactly at from (the hole is
// filled); false when there is no replay endpoint, the replay failed or
// the engine's buffer no longer reaches back (then the worker was cleared
// before the batches it had were applied).
func (s *Subscriber) replayFrom(ctx context.Context, from uint64, cause string) bool {
	filled, first := false, true
	err := s.replayEach(ctx, from, cause, func(seq uint64, payload []byte) {
		if first {
			filled, first = seq == from || !s.seq.known, false
		}
		s.applyReplayed(seq, payload)
	})
	s.seq.replayed(from)
	return filled && err == nil
}

// applyReplayed applies one replayed batch in sequence order: batches
// already applied are dropped, and a hole before it clears the worker.
func (s *Subscriber) applyReplayed(seq uint64, payload []byte) {
	switch {
	case !s.seq.known || seq == s.seq.next:
	case seq < s.seq.next:
		return
	default:
		s.clear("replay buffer does not reach back")
	}
	s.apply(seq, payload, false)
}
