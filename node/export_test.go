package node

import "github.com/kvrouter/kvrouter/fleet"

// WorkerSets is the running node's worker-set admission, for tests.
func (n *Node) WorkerSets() *fleet.WorkerSets {
	if r := n.reg.Load(); r != nil {
		return r.WorkerSets()
	}
	return nil
}

// EngineRegistry is the running node's engine registry, for tests.
func (n *Node) EngineRegistry() *fleet.Registry { return n.reg.Load() }
