package consensus

import (
	"context"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// proposal is one proposed KV-events entry: how many rank batches it
// carries and the function that waits for its result.
type proposal struct {
	batches int
	wait    func() (*kvrpb.RaftResult, error)
}

// pipe bounds and resolves a Batcher's proposals in flight: admit takes a
// slot before an entry is proposed (waiting while all are taken), release
// returns it when the proposal failed, push hands over the proposal.
// collect waits for the proposals in proposal order on its own goroutine,
// reporting each outcome and freeing its slot once its entry resolved, so
// proposing never waits for an apply unless InFlight entries are out.
//
// Concurrency: one goroutine calls admit, release and push, then close,
// which waits for collect.
type pipe struct {
	slots chan struct{}
	queue chan proposal
	done  chan struct{}
}

// newPipe returns a pipe with room for inFlight proposals and starts its
// collector, which reports each proposal's batches and outcome to
// resolved.
func newPipe(inFlight int, resolved func(batches int, err error)) *pipe {
	p := &pipe{
		slots: make(chan struct{}, inFlight),
		queue: make(chan proposal, inFlight),
		done:  make(chan struct{}),
	}
	go p.collect(resolved)
	return p
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

// collect waits for the queued proposals in order, reporting each to
// resolved, until close.
func (p *pipe) collect(resolved func(batches int, err error)) {
	defer close(p.done)
	for pr := range p.queue {
		_, err := pr.wait()
		resolved(pr.batches, err)
		<-p.slots
	}
}

// close ends collect once the queued proposals resolved.
func (p *pipe) close() {
	close(p.queue)
	<-p.done
}
