package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// raftIngest is the event plane's index on a cluster member: KV events go
// through raft, so that every node applies the same ownership. Only the
// ready leader accepts them (fleet.Gate); followers stand by and
// route from the index their FSM applies.
//
// The leader checks each event against its proposed cursor with the
// index's rule (index.CheckNext) before it queues the event in the
// batcher, so the log carries no gap the FSM would drop. The
// proposed cursors start from the replicated ones whenever the node
// becomes leader (consensus.Node.LeaderEpoch changes): what an earlier
// term proposed may not have committed.
//
// It is confined to the plane's applier goroutine, except Accepting and
// Cursor, which the plane also calls there; the mutex guards against
// misuse only.
type raftIngest struct {
	cn  *consensus.Node
	b   *consensus.Batcher
	log *slog.Logger
	sec *metrics.Security
	now func() time.Time

	mu      sync.Mutex
	epoch   uint64
	cursors map[routing.Worker]uint64
	// gates hold each rank's resync backoff; warned the ranks whose
	// oversized events were logged (once per rank).
	gates  map[routing.Worker]*resyncGate
	warned map[routing.Worker]bool
}

var (
	_ fleet.Index = (*raftIngest)(nil)
	_ fleet.Gate  = (*raftIngest)(nil)
)

func newRaftIngest(cn *consensus.Node, b *consensus.Batcher, log *slog.Logger, sec *metrics.Security) *raftIngest {
	return &raftIngest{cn: cn, b: b, log: log, sec: sec, now: time.Now, cursors: map[routing.Worker]uint64{},
		gates: map[routing.Worker]*resyncGate{}, warned: map[routing.Worker]bool{}}
}

// gate is w's resync gate.
func (r *raftIngest) gate(w routing.Worker) *resyncGate {
	g, ok := r.gates[w]
	if !ok {
		g = &resyncGate{}
		r.gates[w] = g
	}
	return g
}

// resyncTimeout bounds the raft writes of one resync or removal, which
// run on the applier goroutine.
const resyncTimeout = 10 * time.Second

// Accepting implements fleet.Gate: the ready leader ingests.
func (r *raftIngest) Accepting() bool { return r.cn.Ready() }

// sync drops the proposed cursors when leadership changed hands.
func (r *raftIngest) sync() {
	if e := r.cn.LeaderEpoch(); e != r.epoch {
		r.epoch = e
		clear(r.cursors)
	}
}

// cursor is the proposed cursor of w, or the replicated one.
func (r *raftIngest) cursor(w routing.Worker) (uint64, bool) {
	if c, ok := r.cursors[w]; ok {
		return c, true
	}
	return r.cn.FSM().Cursor(w)
}

// Apply implements fleet.Index: it checks the event's id and queues
// it for the next raft entry.
func (r *raftIngest) Apply(ev *routing.Event) error {
	_, err := r.ApplyRun([]routing.Event{*ev})
	return err
}

// ApplyRun implements fleet.RunIndex: it takes the events that
// continue the rank's proposed cursor (index.CheckNext) and queues them
// as batches. A run stops before an engine restart that is not its first
// event, since a batch's ids increase by one.
func (r *raftIngest) ApplyRun(events []routing.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.cn.Ready() {
		return 0, fmt.Errorf("%w: not the leader", consensus.ErrNoLeader)
	}
	r.sync()
	w := events[0].Worker
	cur, _ := r.cursor(w)
	n := 0
	var stop error
	for ; n < len(events); n++ {
		restart, err := index.CheckNext(&events[n], cur)
		if stop = err; err != nil || restart && n > 0 {
			break
		}
		cur = events[n].ID
	}
	if n == 0 {
		return 0, stop
	}
	// Batches are cut by encoded bytes; a drained resync buffer may also
	// be longer than one wire batch.
	k, err := r.b.AddRun(events[:n])
	if k > 0 {
		r.cursors[w] = events[k-1].ID
	}
	if errors.Is(err, consensus.ErrEventTooLarge) {
		r.tooLarge(w, err)
	}
	if err != nil {
		return k, err
	}
	return n, stop
}

// tooLarge counts an event no entry can carry, logs the first of each
// rank, and holds the rank's next resyncs back: the gap it leaves is
// resynced, and a rank that keeps sending such events would otherwise
// write its snapshot into the log again at each one.
func (r *raftIngest) tooLarge(w routing.Worker, err error) {
	r.sec.EventRefused("too_large")
	r.gate(w).refused()
	if !r.warned[w] {
		r.warned[w] = true
		r.log.Warn("KV event refused: larger than any raft entry (logged once per engine rank)", "worker", w.String(), "err", err)
	}
}

// ReplaceWorker implements fleet.Index: the batcher's queued events
// are proposed first, so the replacement follows them in the log, then
// the snapshot goes through raft in chunks.
func (r *raftIngest) ReplaceWorker(w routing.Worker, events []routing.Event, cursor uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.cn.Ready() {
		return fmt.Errorf("%w: not the leader", consensus.ErrNoLeader)
	}
	r.sync()
	g, now := r.gate(w), r.now()
	if ok, wait := g.admit(now); !ok {
		r.sec.ResyncBackoff()
		if !g.reported {
			g.reported = true
			r.log.Warn("resync refused: the last one made no progress (logged once per backoff)", "worker", w.String(),
				"backoff", g.backoff, "retry_in", wait)
		}
		return fmt.Errorf("%w: retry in %v", errResyncBackoff, wait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resyncTimeout)
	defer cancel()
	if _, err := r.b.Flush(ctx); err != nil {
		return err
	}
	delete(r.cursors, w)
	if err := r.cn.ReplaceRank(ctx, w, events, cursor); err != nil {
		return err
	}
	g.done(now)
	r.cursors[w] = cursor
	return nil
}

// RemoveEngine implements fleet.Index: the leader removes the
// engine's blocks, cursors and card through raft, unless nothing of the
// engine was ever proposed or replicated: an engine that registered and
// vanished without a snapshot or an event (a forged card, typically)
// costs no log entry, so that a flood of cards cannot grow the log.
func (r *raftIngest) RemoveEngine(id routing.WorkerID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	proposed := false
	for w := range r.cursors {
		if w.ID == id {
			delete(r.cursors, w)
			proposed = true
		}
	}
	if !r.cn.Ready() || !proposed && !r.replicated(id) {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), resyncTimeout)
	defer cancel()
	if _, err := r.b.Flush(ctx); err != nil {
		r.log.Warn("removing an engine: flushing events", "engine", id, "err", err)
	}
	if _, err := r.cn.RemoveWorker(ctx, id); err != nil {
		r.log.Warn("removing an engine through raft", "engine", id, "err", err)
	}
	return 0
}

// Cursor implements fleet.Index.
func (r *raftIngest) Cursor(w routing.Worker) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sync()
	return r.cursor(w)
}

// replicated reports whether the replicated state holds anything of
// engine id: its card, blocks of any rank, or rank 0's cursor (every
// engine has a rank 0, and a resync sets its cursor).
func (r *raftIngest) replicated(id routing.WorkerID) bool {
	fsm := r.cn.FSM()
	if _, ok := fsm.Worker(id); ok {
		return true
	}
	if _, ok := fsm.Cursor(routing.Worker{ID: id}); ok {
		return true
	}
	for _, w := range fsm.Index().Workers() {
		if w.ID == id {
			return true
		}
	}
	return false
}
