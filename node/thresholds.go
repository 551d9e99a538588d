package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/frontend"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// localThresholds is the operator API's threshold store on a node
// without a cluster: the dispatcher's own, lost on restart.
type localThresholds struct{ d *dispatch.Dispatcher }

var _ frontend.ThresholdStore = localThresholds{}

func (l localThresholds) Thresholds(model string) (policy.Thresholds, bool) {
	return l.d.Thresholds(model)
}

func (l localThresholds) SetThresholds(_ context.Context, model string, th *policy.Thresholds) error {
	return l.d.SetThresholds(model, th)
}

// raftThresholds is the operator API's threshold store in a cluster: a
// change is one raft entry, which every node applies; the dispatcher
// reads the FSM's table (thresholdSource).
type raftThresholds struct {
	cn *consensus.Node
	d  *dispatch.Dispatcher
}

var _ frontend.ThresholdStore = raftThresholds{}

func (r raftThresholds) Thresholds(model string) (policy.Thresholds, bool) {
	return r.d.Thresholds(model)
}

// SetThresholds proposes the change and waits until this node applied it,
// so that the answer (and this node's next request) sees it.
func (r raftThresholds) SetThresholds(ctx context.Context, model string, th *policy.Thresholds) error {
	t := &kvrpb.RaftThresholds{Model: model}
	if th != nil {
		t.ActiveDecodeBlocks, t.ActivePrefillTokens, t.ActivePrefillTokensFrac =
			th.ActiveDecodeBlocks, th.ActivePrefillTokens, th.ActivePrefillTokensFrac
	}
	idx, err := r.cn.SetThresholds(ctx, newRequestID(), t, th == nil)
	if err != nil {
		return fmt.Errorf("replicating busy thresholds: %w", err)
	}
	for r.cn.FSM().AppliedIndex() < idx {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.d.ThresholdsChanged(model)
	return nil
}

// thresholdSource reads a model's runtime thresholds from the FSM.
func thresholdSource(f *consensus.FSM) func(model string) *policy.Thresholds {
	return func(model string) *policy.Thresholds {
		t, ok := f.RuntimeThresholds(model)
		if !ok {
			return nil
		}
		return &policy.Thresholds{ActiveDecodeBlocks: t.ActiveDecodeBlocks, ActivePrefillTokens: t.ActivePrefillTokens,
			ActivePrefillTokensFrac: t.ActivePrefillTokensFrac}
	}
}

// newRequestID makes a raft request id for an idempotent retry.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "thr-" + hex.EncodeToString(b[:])
}

// thresholdStore is the operator API's store for this node.
func (n *Node) thresholdStore(d *dispatch.Dispatcher) frontend.ThresholdStore {
	if cn := n.clusterNode.Load(); cn != nil {
		return raftThresholds{cn: cn, d: d}
	}
	return localThresholds{d: d}
}
