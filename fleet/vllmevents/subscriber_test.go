package vllmevents

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// fakeEngine numbers batches as a vLLM publisher does and keeps the last
// `keep` of them for replay; each batch stores one new block chained on
// the previous one, so the index's depth shows which batches applied.
type fakeEngine struct {
	t       *testing.T
	batches [][]byte
	keep    int
	replays int
	// fail is how many of the next replays fail.
	fail int
}

func (e *fakeEngine) next() (uint64, []byte) {
	i := len(e.batches)
	var parent any
	if i > 0 {
		parent = i
	}
	toks := []any{i * 4, i*4 + 1, i*4 + 2, i*4 + 3}
	p := mustPack(e.t, []any{float64(i), []any{[]any{"BlockStored", []any{i + 1}, parent, toks, 4, nil, "GPU"}}})
	e.batches = append(e.batches, p)
	return uint64(i), p
}

func (e *fakeEngine) replay(_ context.Context, from uint64, fn func(uint64, []byte)) error {
	e.replays++
	if e.fail > 0 {
		e.fail--
		return errors.New("replay endpoint unreachable")
	}
	for i := max(0, len(e.batches)-e.keep); i < len(e.batches); i++ {
		if uint64(i) >= from {
			fn(uint64(i), e.batches[i])
		}
	}
	return nil
}

// depth is how many of the engine's chained blocks the index holds from
// the first one.
func depth(idx *index.Exact, n int) int32 {
	toks := make([]uint32, 4*n)
	for i := range toks {
		toks[i] = uint32(i)
	}
	hashes, _ := routing.BlockHashes(nil, toks, 4, routing.HashSeed)
	for _, m := range idx.FindMatches(hashes, nil) {
		return m.Device
	}
	return 0
}

func TestSubscriberSequence(t *testing.T) {
	tests := []struct {
		name string
		keep int
		fail int
		// deliver lists the batches delivered live, by number, after the
		// engine has produced total batches.
		total   int
		deliver []int
		noRepl  bool
		depth   int32
		gaps    uint64
		replays int
		resyncs uint64
		rejects uint64
	}{
		{name: "in order", keep: 10, total: 4, deliver: []int{0, 1, 2, 3}, depth: 4, replays: 0},
		{name: "gap filled by replay", keep: 10, total: 5, deliver: []int{0, 1, 4}, depth: 5, gaps: 1, replays: 1},
		{name: "duplicates after replay dropped", keep: 10, total: 5, deliver: []int{0, 3, 4}, depth: 5, gaps: 1, replays: 1},
		// The resync's replay returns batch 4 alone, whose parent is gone.
		{name: "replay buffer too short resyncs", keep: 1, total: 5, deliver: []int{0, 1, 4}, depth: 0, gaps: 1, replays: 2, resyncs: 1},
		{name: "failed replay resyncs", keep: 10, fail: 1, total: 4, deliver: []int{0, 3}, depth: 4, gaps: 1, replays: 2, resyncs: 1},
		{name: "failed resync clears", keep: 10, fail: 2, total: 4, deliver: []int{0, 3}, depth: 0, gaps: 1, replays: 2, resyncs: 1},
		{name: "no replay endpoint clears", noRepl: true, total: 4, deliver: []int{0, 1, 3}, depth: 0, gaps: 1, resyncs: 1},
		{name: "first batch late is not a gap", noRepl: true, total: 4, deliver: []int{2, 3}, depth: 0, gaps: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := index.NewExact()
			s := offline(t, 4, idx)
			e := &fakeEngine{t: t, keep: tc.keep, fail: tc.fail}
			if !tc.noRepl {
				s.replay = e.replay
			}
			for range tc.total {
				e.next()
			}
			for _, i := range tc.deliver {
				s.handle(context.Background(), uint64(i), e.batches[i])
			}
			st := s.Stats()
			if got := depth(idx, tc.total); got != tc.depth {
				t.Errorf("depth %d, want %d", got, tc.depth)
			}
			// offline's start counts one resync.
			if st.Gaps != tc.gaps || e.replays != tc.replays || st.Resyncs-1 != tc.resyncs || st.Rejected != tc.rejects {
				t.Errorf("gaps %d replays %d resyncs %d rejected %d, want %d %d %d %d", st.Gaps, e.replays, st.Resyncs-1,
					st.Rejected, tc.gaps, tc.replays, tc.resyncs, tc.rejects)
			}
		})
	}
}

// TestSubscriberRestart: a sequence that goes back is a new incarnation:
// counted as a regression, the worker cleared, its history replayed.
func TestSubscriberRestart(t *testing.T) {
	idx := index.NewExact()
	s := offline(t, 4, idx)
	old := &fakeEngine{t: t, keep: 10}
	for range 3 {
		seq, p := old.next()
		s.handle(context.Background(), seq, p)
	}
	fresh := &fakeEngine{t: t, keep: 10}
	s.replay = fresh.replay
	fresh.next()
	seq, p := fresh.next()
	s.handle(context.Background(), seq, p) // seq 1 after 2: regression, then a replay from 0
	st := s.Stats()
	if st.Restarts != 1 || st.Gaps != 0 || fresh.replays != 1 || depth(idx, 2) != 2 || idx.Stats().Pairs != 2 {
		t.Fatalf("stats %+v replays %d depth %d pairs %d", st, fresh.replays, depth(idx, 2), idx.Stats().Pairs)
	}
}

// TestSubscriberResumeProbe: after a reconnection the replay from the last
// batch applied tells the same engine (same bytes) from a restarted one.
func TestSubscriberResumeProbe(t *testing.T) {
	tests := []struct {
		name      string
		restarted bool
		fresh     int // batches the restarted engine has published
		restarts  uint64
		depth     int32
	}{
		{name: "same engine", depth: 4},
		{name: "restarted, fewer batches", restarted: true, fresh: 1, restarts: 1, depth: 1},
		{name: "restarted, more batches", restarted: true, fresh: 5, restarts: 1, depth: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := index.NewExact()
			s := offline(t, 4, idx)
			e := &fakeEngine{t: t, keep: 10}
			s.replay = e.replay
			for range 3 {
				seq, p := e.next()
				s.handle(context.Background(), seq, p)
			}
			if tc.restarted {
				e = &fakeEngine{t: t, keep: 10}
				s.replay = e.replay
				for range tc.fresh {
					e.next()
				}
				// Batch 2 of the restarted engine differs from the old one's
				// in its timestamp alone: bytes, not meaning, tell them apart.
				if tc.fresh > 2 {
					e.batches[2] = mustPack(t, []any{9.0, []any{[]any{"BlockStored", []any{3}, 2, []any{8, 9, 10, 11}, 4, nil, "GPU"}}})
				}
			} else {
				e.next()
			}
			s.resume(context.Background(), "reconnect")
			if got := depth(idx, 5); got != tc.depth || s.Stats().Restarts != tc.restarts {
				t.Fatalf("depth %d restarts %d, want %d %d", got, s.Stats().Restarts, tc.depth, tc.restarts)
			}
		})
	}
}

func TestSubscriberRefusesMessages(t *testing.T) {
	payload := mustPack(t, []any{1.0, []any{}, 0})
	seq := binary.BigEndian.AppendUint64(nil, 0)
	tests := []struct {
		name   string
		frames [][]byte
		rank   uint32
		reason string
	}{
		{"two frames", [][]byte{nil, seq}, 0, ReasonFrames},
		{"short sequence", [][]byte{nil, seq[:4], payload}, 0, ReasonFrames},
		{"wrong topic", [][]byte{[]byte("other"), seq, payload}, 0, ReasonTopic},
		{"wrong rank", [][]byte{nil, seq, payload}, 1, ReasonRank},
		{"malformed payload", [][]byte{nil, seq, []byte{0xc1}}, 0, ReasonMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := index.NewExact()
			m, _ := NewMetrics(nil)
			s, err := New(Config{Worker: routing.Worker{ID: 1, Rank: tc.rank}, Endpoint: "tcp://127.0.0.1:1", BlockSize: 4}, idx, m, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.reset(ResyncStart)
			s.handleMessage(context.Background(), tc.frames)
			if s.Stats().Rejected != 1 {
				t.Fatalf("rejected %d", s.Stats().Rejected)
			}
			if got := counterValue(t, m, tc.reason); got != 1 {
				t.Fatalf("reason %s counted %v", tc.reason, got)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"wildcard host", Config{Endpoint: "tcp://*:5557", BlockSize: 16}},
		{"no port", Config{Endpoint: "tcp://engine", BlockSize: 16}},
		{"bad scheme", Config{Endpoint: "http://engine:5557", BlockSize: 16}},
		{"bad replay", Config{Endpoint: "tcp://engine:5557", ReplayEndpoint: "engine:5558", BlockSize: 16}},
		{"no block size", Config{Endpoint: "tcp://engine:5557"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.EnsureDefaults().Validate(); !errors.Is(err, ErrConfig) {
				t.Fatalf("err %v", err)
			}
		})
	}
	ok := Config{Endpoint: "tcp://engine:5557", ReplayEndpoint: "tcp://engine:5558", BlockSize: 16}
	if err := ok.EnsureDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
}
