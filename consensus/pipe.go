package consensus

import (
	"cmp"
	"context"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// proposal is one proposed KV-events entry: how many rank batches it
// carries and the function that waits for its result.
type proposal struct {
	batches int
	wait    func() (*kvrpb.RaftResult, error)
}

// sink bounds and resolves a Batcher's proposals in flight: admit takes a
// slot before an entry is proposed (waiting while all are taken), release
// returns it when the proposal failed, push hands over the proposal.
type sink interface {
	admit(ctx context.Context) error
	release()
	push(p proposal)
}

// pipe is Batcher.Run's sink: collect waits for the proposals in proposal
// order on its own goroutine, freeing each slot once its entry resolved,
// so proposing never waits for an apply unless InFlight entries are out.
//
// Concurrency: one goroutine calls admit, release and push, then close;
// collect runs on another.
type pipe struct {
	slots chan struct{}
	queue chan proposal
	done  chan struct{}
}

var (
	_ sink = (*pipe)(nil)
	_ sink = (*waitQueue)(nil)
)

// newPipe returns a pipe with room for inFlight proposals.
func newPipe(inFlight int) *pipe {
	return &pipe{
		slots: make(chan struct{}, inFlight),
		queue: make(chan proposal, inFlight),
		done:  make(chan struct{}),
	}
}

// admit waits for a free slot or the end of ctx.
func (p *pipe) admit(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release frees the slot of an entry that was not proposed.
func (p *pipe) release() { <-p.slots }

// push queues an admitted proposal; the queue has a place for every slot,
// so it never blocks.
func (p *pipe) push(pr proposal) { p.queue <- pr }

// collect waits for the queued proposals in order, reporting failures to
// fail, until close.
func (p *pipe) collect(fail func(error)) {
	defer close(p.done)
	for pr := range p.queue {
		if _, err := pr.wait(); err != nil {
			fail(err)
		}
		<-p.slots
	}
}

// close ends collect once the queued proposals resolved.
func (p *pipe) close() {
	close(p.queue)
	<-p.done
}

// waitQueue is Flush's sink: the caller's goroutine waits for the oldest
// proposal when max are in flight, and drain waits for the rest. It
// counts the batches committed and keeps the first error.
type waitQueue struct {
	max  int
	q    []proposal
	done int
	err  error
}

// admit waits for the oldest proposal when the queue is full, and refuses
// further entries once one failed.
func (w *waitQueue) admit(context.Context) error {
	if len(w.q) == w.max {
		w.waitOldest()
	}
	return w.err
}

// release is a no-op: admit took no slot of its own.
func (w *waitQueue) release() {}

// push queues a proposal.
func (w *waitQueue) push(p proposal) { w.q = append(w.q, p) }

// drain waits for every queued proposal.
func (w *waitQueue) drain() {
	for len(w.q) > 0 {
		w.waitOldest()
	}
}

// waitOldest waits for the oldest proposal and records its outcome.
func (w *waitQueue) waitOldest() {
	p := w.q[0]
	w.q = w.q[1:]
	if _, err := p.wait(); err != nil {
		w.err = cmp.Or(w.err, err)
		return
	}
	w.done += p.batches
}
