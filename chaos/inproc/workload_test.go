package inproc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// outcome is how one bind ended for its client.
type outcome string

const (
	// opOK is an acknowledged bind: it must survive every fault.
	opOK outcome = "ok"
	// opFail is a bind refused before it was proposed: it must never
	// appear.
	opFail outcome = "fail"
	// opIndeterminate may or may not have committed.
	opIndeterminate outcome = "indeterminate"
)

// op is one recorded bind.
type op struct {
	key        string
	via        string // the member that answered
	worker     uint64
	version    uint64
	outcome    outcome
	err        error
	start, end time.Time
}

// workload runs clients that bind fresh session keys on the ready
// leader, each with its own request id, and records every outcome.
type workload struct {
	c    *cluster
	seed uint64
	stop chan struct{}
	wg   sync.WaitGroup

	mu  sync.Mutex
	ops []op
}

// startLoad starts clients binding until stopLoad.
func (c *cluster) startLoad(clients int, seed uint64) *workload {
	w := &workload{c: c, seed: seed, stop: make(chan struct{})}
	for i := range clients {
		w.wg.Go(func() { w.client(i) })
	}
	return w
}

// stopLoad stops the clients and waits for them.
func (w *workload) stopLoad() {
	close(w.stop)
	w.wg.Wait()
}

// client binds s-<client>-<n> for n = 0, 1, ... on whichever member leads.
func (w *workload) client(id int) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(id)))
	for n := 0; ; n++ {
		select {
		case <-w.stop:
			return
		default:
		}
		node := w.c.liveLeader()
		if node == nil {
			time.Sleep(5 * time.Millisecond)
			n--
			continue
		}
		key := fmt.Sprintf("s-%d-%d", id, n)
		o := w.bind(node, key, 1+rng.Uint64N(64))
		w.record(o)
		if o.outcome != opOK {
			time.Sleep(2 * time.Millisecond) // As a client backs off.
		}
	}
}

// bind applies one bind and classifies its outcome.
func (w *workload) bind(node *consensus.Node, key string, worker uint64) op {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	o := op{key: key, via: node.ID(), worker: worker, start: time.Now()}
	r, err := node.Apply(ctx, &kvrpb.RaftBindSession{Key: key, WorkerId: worker, IdleTtlNanos: int64(time.Hour),
		MaxSessions: 1 << 30, RequestId: key, Dc: "dc1"})
	o.end, o.err = time.Now(), err
	switch {
	case err == nil && r.GetWon():
		o.outcome, o.version = opOK, r.GetBinding().GetVersion()
	case err == nil:
		o.outcome, o.err = opFail, fmt.Errorf("bind of a fresh key lost: code %d", r.GetCode())
	case errors.Is(err, consensus.ErrIndeterminate) || errors.Is(err, context.DeadlineExceeded):
		o.outcome = opIndeterminate
	default:
		o.outcome = opFail
	}
	return o
}

// record keeps o.
func (w *workload) record(o op) {
	w.mu.Lock()
	w.ops = append(w.ops, o)
	w.mu.Unlock()
}

// history returns the recorded ops.
func (w *workload) history() []op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]op(nil), w.ops...)
}

// liveLeader returns the ready leader's node, or nil.
func (c *cluster) liveLeader() *consensus.Node {
	for _, m := range c.members {
		if n := m.live.Load(); n != nil && n.Ready() {
			return n
		}
	}
	return nil
}

// counts returns the number of ops by outcome.
func counts(ops []op) map[outcome]int {
	out := map[outcome]int{opOK: 0, opFail: 0, opIndeterminate: 0}
	for _, o := range ops {
		out[o.outcome]++
	}
	return out
}

// unavailability is the time from at to the end of the first
// acknowledged bind that started at or after it.
func unavailability(ops []op, at time.Time) time.Duration {
	best := time.Duration(-1)
	for _, o := range ops {
		if o.outcome == opOK && !o.start.Before(at) {
			if d := o.end.Sub(at); best < 0 || d < best {
				best = d
			}
		}
	}
	return best
}

// latencyQuantile returns the q-quantile of acknowledged binds' latency
// among those started in [from, to).
func latencyQuantile(ops []op, from, to time.Time, q float64) time.Duration {
	var ds []time.Duration
	for _, o := range ops {
		if o.outcome == opOK && !o.start.Before(from) && o.start.Before(to) {
			ds = append(ds, o.end.Sub(o.start))
		}
	}
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
