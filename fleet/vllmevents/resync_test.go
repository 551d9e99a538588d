package vllmevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

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
