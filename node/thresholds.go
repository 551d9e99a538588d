package node

import (
	"context"

	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/frontend"
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

// thresholdStore is the operator API's store for this node.
func (n *Node) thresholdStore(d *dispatch.Dispatcher) frontend.ThresholdStore {
	return localThresholds{d: d}
}
