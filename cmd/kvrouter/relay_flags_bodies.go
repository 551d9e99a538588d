package main

import "github.com/spf13/pflag"

// registerBodies registers the gateway's budget of buffered request
// bodies (see registerBodyBudgetFlag).
func (f *relayFlags) registerBodies(fs *pflag.FlagSet) {
	registerBodyBudgetFlag(fs, &f.cfg.Edge.MaxBufferedBodyBytes)
}
