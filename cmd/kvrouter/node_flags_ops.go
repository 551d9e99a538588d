package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// registerOps binds the options of a node's lifecycle: how it drains on
// SIGTERM.
func (f *nodeFlags) registerOps(fs *pflag.FlagSet) {
	d := &f.cfg.Drain
	fs.DurationVar(&d.ReadyDelay, "drain-ready-delay", 0, "on SIGTERM, keep accepting this long after /ready turns 503, so load balancers stop sending first (0: close at once, when a preStop hook already waits)")
	fs.DurationVar(&d.Timeout, "drain-timeout", frontend.ShutdownTimeout, "on SIGTERM, let in-flight requests finish for this long; streams still running then end with a shutting_down error event")
	fs.DurationVar(&d.TransferTimeout, "drain-transfer-timeout", node.DefaultTransferTimeout, "on SIGTERM, a raft leader waits this long for another voter to take the leadership before it stops")
}
