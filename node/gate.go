package node

import "sync/atomic"

// engineGate holds the routed endpoints back until the fleet first counts
// MinInitialEngines live engines (the reference's
// router_min_initial_workers startup gate), so that the first requests
// are not all placed on whichever engine registered first. Once open it
// stays open: a fleet that shrinks later is served by the engines left,
// as the reference's gate, which only delays the start, does.
type engineGate struct {
	min   int
	count func() int
	open  atomic.Bool
}

// ready reports whether the gate is open, opening it when the fleet has
// reached its size. Past the opening it costs one atomic load.
func (g *engineGate) ready() bool {
	if g.min <= 0 || g.open.Load() {
		return true
	}
	if g.count() < g.min {
		return false
	}
	g.open.Store(true)
	return true
}
