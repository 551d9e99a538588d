package fleet

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// fetch starts the snapshot request of one rank on its own goroutine, so
// that a slow engine never stalls the other ranks' events; the answer
// goes back to the applier. It is called by the applier, which the wait
// group already counts, so the Add never races with Close's Wait.
func (p *Plane) fetch(w routing.Worker, gen uint64) {
	p.wg.Go(func() {
		last, events, err := p.requestSnapshot(w)
		if p.ctx.Err() != nil {
			return
		}
		p.post(item{kind: itemSnapshot, snap: snapshotResult{w: w, gen: gen, last: last, events: events, err: err}})
	})
}

// requestSnapshot asks the rank for its state, at most SnapshotAttempts
// times, waiting SnapshotBackoff (doubling) between attempts.
func (p *Plane) requestSnapshot(w routing.Worker) (uint64, []routing.Event, error) {
	req, err := proto.Marshal(&kvrpb.SnapshotRequest{EngineId: uint64(w.ID), Rank: w.Rank})
	if err != nil {
		return 0, nil, err
	}
	subject := kvrpb.SubjectSnapshot(p.cfg.DC, uint64(w.ID), w.Rank)
	backoff := p.cfg.SnapshotBackoff
	for attempt := 1; ; attempt++ {
		last, events, err := p.snapshotOnce(subject, w, req)
		if err == nil || attempt >= p.cfg.SnapshotAttempts || !p.sleep(backoff) {
			return last, events, err
		}
		p.log.Debug("snapshot attempt failed", "worker", w.String(), "attempt", attempt, "err", err)
		backoff *= 2
	}
}

func (p *Plane) snapshotOnce(subject string, w routing.Worker, req []byte) (uint64, []routing.Event, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.SnapshotTimeout)
	defer cancel()
	msg, err := p.nc.RequestWithContext(ctx, subject, req)
	if err != nil {
		return 0, nil, fmt.Errorf("snapshot of %v: %w", w, err)
	}
	got, last, events, err := wire.DecodeSnapshot(msg.Data)
	if err != nil {
		return 0, nil, err
	}
	if got != w {
		return 0, nil, fmt.Errorf("%w: snapshot of %v answered for %v", wire.ErrMalformed, w, got)
	}
	return last, events, nil
}

// sleep waits d unless the plane stops first, and reports whether it
// waited.
func (p *Plane) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}
