package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// registerBodies registers the node's budget of buffered request bodies.
func (f *nodeFlags) registerBodies(fs *pflag.FlagSet) {
	registerBodyBudgetFlag(fs, &f.cfg.Frontend.Edge.MaxBufferedBodyBytes)
}

// registerBodyBudgetFlag registers --max-buffered-body-bytes, which a
// router node and a relay's gateway share with the same meaning.
func registerBodyBudgetFlag(fs *pflag.FlagSet, v *int64) {
	fs.Int64Var(v, "max-buffered-body-bytes", oaiedge.MaxBufferedBodyBytes,
		"request body bytes held at once over all requests of the process; a body that does not fit is refused with 503 and Retry-After before it is read (bodies over 1 MiB may use three quarters of it; -1: no budget)")
}
