package vllmevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

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

// moveCursor has another writer advance w's cursor in idx, as a removal
// of the engine, a restored snapshot or a new raft leader's replicated
// cursor does.
func moveCursor(t *testing.T, idx *index.Exact, w routing.Worker) {
	t.Helper()
	cur, _ := idx.Cursor(w)
	other := routing.Event{Worker: w, ID: cur + 1, Kind: routing.EventCleared}
	if err := idx.Apply(&other); err != nil {
		t.Fatal(err)
	}
}

// TestSubscriberCursorMovedUnderIt: another writer advanced the worker's
// cursor. With a replay endpoint the subscriber resyncs from the engine's
// buffer and ends with every block; without one it clears the worker and
// rebuilds from the batch in hand, whose block chains on one it lost.
func TestSubscriberCursorMovedUnderIt(t *testing.T) {
	for _, replay := range []bool{true, false} {
		t.Run(fmt.Sprintf("replay=%v", replay), func(t *testing.T) {
			idx := index.NewExact()
			s := offline(t, 4, idx)
			e := &fakeEngine{t: t, keep: 10}
			if replay {
				s.replay = e.replay
			}
			for range 2 {
				seq, p := e.next()
				s.handle(context.Background(), seq, p)
			}
			moveCursor(t, idx, routing.Worker{ID: 1})
			seq, p := e.next()
			s.handleMessage(context.Background(), frames(seq, p)) // refused: out of step, then resynced
			st := idx.Stats()
			cur, _ := idx.Cursor(routing.Worker{ID: 1})
			if replay && (depth(idx, 3) != 3 || st.Pairs != 3) || !replay && (st.Pairs != 0 || st.UnknownParents != 1) {
				t.Fatalf("depth %d, stats %+v", depth(idx, 3), st)
			}
			if cur != s.ids || s.Stats().Resyncs != 2 || s.lost {
				t.Fatalf("cursor %d (subscriber %d), resyncs %d, lost %v", cur, s.ids, s.Stats().Resyncs, s.lost)
			}
		})
	}
}

// frames is a live message of batch seq.
func frames(seq uint64, payload []byte) [][]byte {
	return [][]byte{nil, binary.BigEndian.AppendUint64(nil, seq), payload}
}

// TestSubscriberReplayedBatchAfterCursorMoved is issue 28's sequence: the
// worker's cursor moved under the subscriber (the engine expired and was
// registered again), then a batch reaches it only through a gap's
// replay. The replayed batch is refused as out of step, and the resync
// that follows brings back every block the engine buffered, the withheld
// batch's included.
func TestSubscriberReplayedBatchAfterCursorMoved(t *testing.T) {
	idx := index.NewExact()
	s := offline(t, 4, idx)
	e := &fakeEngine{t: t, keep: 100}
	s.replay = e.replay
	for range 7 {
		seq, p := e.next()
		s.handleMessage(context.Background(), frames(seq, p))
	}
	moveCursor(t, idx, routing.Worker{ID: 1})
	e.next() // 7, withheld from the live stream
	seq, p := e.next()
	s.handleMessage(context.Background(), frames(seq, p))
	if got := depth(idx, 9); got != 9 {
		t.Fatalf("depth %d after the replay, want 9 (stats %+v)", got, s.Stats())
	}
	if st := s.Stats(); st.Gaps != 1 || st.Resyncs != 2 || e.replays != 2 {
		t.Fatalf("stats %+v, replays %d: want one gap, a resync after the start's and two replays", st, e.replays)
	}
}

// TestSubscriberResyncRetry: a resync whose replay fails leaves the worker
// rebuilt from live batches and is tried again once its backoff has
// passed, on the next live batch; then the worker holds every block.
func TestSubscriberResyncRetry(t *testing.T) {
	idx := index.NewExact()
	s := offline(t, 4, idx)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	e := &fakeEngine{t: t, keep: 100}
	s.replay = e.replay
	seq, p := e.next()
	s.handle(context.Background(), seq, p)
	e.next() // withheld
	e.fail = 2
	seq, p = e.next()
	s.handleMessage(context.Background(), frames(seq, p)) // the gap's replay and the resync's fail
	if got, pairs := depth(idx, 3), idx.Stats().Pairs; got != 0 || pairs != 0 || !s.retry.pending {
		t.Fatalf("depth %d, pairs %d, retry %+v: want the worker cleared and a retry due", got, pairs, s.retry)
	}
	seq, p = e.next()
	s.handleMessage(context.Background(), frames(seq, p)) // before the backoff: applied, no resync
	if e.replays != 2 {
		t.Fatalf("%d replays before the backoff passed, want 2", e.replays)
	}
	now = now.Add(s.cfg.Retry)
	seq, p = e.next()
	s.handleMessage(context.Background(), frames(seq, p))
	if got := depth(idx, 5); got != 5 || s.retry.pending || e.replays != 3 {
		t.Fatalf("depth %d, retry %+v, replays %d after the retry", got, s.retry, e.replays)
	}
}

// TestSubscriberResyncIsLogged: a resync says why in one log line.
func TestSubscriberResyncIsLogged(t *testing.T) {
	var buf bytes.Buffer
	m, _ := NewMetrics(nil)
	s, err := New(Config{Worker: routing.Worker{ID: 1}, Endpoint: "tcp://127.0.0.1:1", BlockSize: 4}, index.NewExact(), m,
		slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e := &fakeEngine{t: t, keep: 1}
	s.replay = e.replay
	s.reset(ResyncStart)
	for range 3 {
		e.next()
	}
	s.handle(context.Background(), 0, e.batches[0])
	s.handle(context.Background(), 2, e.batches[2])
	logged := false
	for _, l := range strings.Split(buf.String(), "\n") {
		logged = logged || strings.Contains(l, `level=WARN msg="resyncing engine blocks"`) && strings.Contains(l, "reason=rolled_over")
	}
	if !logged {
		t.Fatalf("no warning names the resync and its reason; log:\n%s", buf.String())
	}
	if got := testutil.ToFloat64(m.resyncs.WithLabelValues(ResyncRolledOver)); got != 1 {
		t.Fatalf("rolled_over resyncs %v", got)
	}
}

// gated is an index that takes events only while open, as a raft
// cluster's leader does.
type gated struct {
	*index.Exact
	open bool
}

func (g *gated) Accepting() bool { return g.open }

func (g *gated) Apply(ev *routing.Event) error {
	if !g.open {
		return nil
	}
	return g.Exact.Apply(ev)
}

// TestSubscriberGateOpens: batches dropped while the sink's gate was
// closed are rebuilt from the engine's buffer when it opens, without a
// further batch; a gate that opens on the subscriber's own cursor costs
// nothing.
func TestSubscriberGateOpens(t *testing.T) {
	idx := &gated{Exact: index.NewExact()}
	s := offline(t, 4, idx)
	e := &fakeEngine{t: t, keep: 100}
	s.replay = e.replay
	for range 3 {
		seq, p := e.next()
		s.handleMessage(context.Background(), frames(seq, p))
	}
	s.checkGate(context.Background())
	if depth(idx.Exact, 3) != 0 || e.replays != 0 {
		t.Fatalf("a closed gate applied or resynced: depth %d, replays %d", depth(idx.Exact, 3), e.replays)
	}
	idx.open = true
	s.checkGate(context.Background())
	if got := depth(idx.Exact, 3); got != 3 || e.replays != 1 {
		t.Fatalf("depth %d, replays %d once the gate opened: want 3 and 1", got, e.replays)
	}
	idx.open = false
	s.checkGate(context.Background())
	idx.open = true
	s.checkGate(context.Background()) // in step: nothing to do
	if e.replays != 1 || s.Stats().Resyncs != 2 {
		t.Fatalf("replays %d, resyncs %d after reopening in step", e.replays, s.Stats().Resyncs)
	}
}
