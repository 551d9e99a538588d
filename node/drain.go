package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// DrainConfig says how a node stops when its context ends (SIGTERM from
// `kvrouter node`): it stops accepting, lets its requests finish, and a
// cluster member hands its raft leadership on before raft stops.
type DrainConfig struct {
	// ReadyDelay (drain_ready_delay) is how long the node keeps accepting
	// after GET /ready turned 503, before its listener closes: the time a
	// load balancer needs to see it and stop sending. Default 0, for
	// deployments whose preStop hook already waits (see deploy/); set it
	// where nothing else does.
	ReadyDelay time.Duration
	// Timeout (drain_timeout) bounds the wait for in-flight requests once
	// the listener closed (default frontend.ShutdownTimeout, 30 s: most
	// completions end well within it). Streams still running then end
	// with an error event of type shutting_down, requests still waiting
	// for their engine with a 503; clients retry them elsewhere.
	Timeout time.Duration
	// TransferTimeout (drain_transfer_timeout) bounds the leadership
	// transfer (default 10 s, several election timeouts).
	TransferTimeout time.Duration
	// NoTransfer stops a leader without handing its leadership on, as a
	// crash would: for simulations of a leader's failure (the demo's
	// leader kill). Not a flag.
	NoTransfer bool
}

// DefaultTransferTimeout is DrainConfig.TransferTimeout's default.
const DefaultTransferTimeout = 10 * time.Second

// validate checks the drain options; errors name the key.
func (d *DrainConfig) validate() error {
	for _, o := range []struct {
		key string
		v   time.Duration
	}{{"drain_ready_delay", d.ReadyDelay}, {"drain_timeout", d.Timeout}, {"drain_transfer_timeout", d.TransferTimeout}} {
		if o.v < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrConfig, o.key, o.v)
		}
	}
	return nil
}

// serveUntilDrained runs fe on ln until ctx ends, then drains: /ready
// turns 503 at once, the listener closes after ReadyDelay, in-flight
// requests get up to Timeout, and meanwhile a leader transfers its
// leadership. It returns when both the requests and the transfer are
// done, so that raft shuts down (in the caller's deferred close) as a
// follower.
func (n *Node) serveUntilDrained(ctx context.Context, fe *frontend.Server, serve func(context.Context) error) error {
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		select {
		case <-serveCtx.Done():
			return // serve ended on its own
		case <-ctx.Done():
		}
		n.log.Info("draining", "ready_delay", n.cfg.Drain.ReadyDelay, "timeout", n.cfg.Frontend.ShutdownTimeout)
		fe.BeginDrain()
		sleepCtx(serveCtx, n.cfg.Drain.ReadyDelay)
		stopServing()
		n.transferLeadership()
	}()
	err := serve(serveCtx)
	stopServing()
	<-drained
	return err
}

// transferLeadership hands a leader's raft leadership on, logging the
// outcome; a follower or a single node has nothing to do.
func (n *Node) transferLeadership() {
	cn := n.Cluster()
	if cn == nil || !cn.IsLeader() || n.cfg.Drain.NoTransfer {
		return
	}
	timeout := cmpOr(n.cfg.Drain.TransferTimeout, DefaultTransferTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	to, err := cn.TransferLeadership(ctx)
	switch {
	case errors.Is(err, consensus.ErrNoTransferTarget):
		n.log.Warn("leadership not transferred: no other voter took it", "err", err)
	case err != nil:
		n.log.Warn("leadership transfer failed", "err", err)
	default:
		n.log.Info("leadership transferred", "to", to, "took", time.Since(start).Round(time.Millisecond))
	}
}

// cmpOr is d, or def when d is zero.
func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
