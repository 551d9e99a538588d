package main

import "github.com/spf13/pflag"

// registerNATS binds the options that authenticate the relay to the DC's
// NATS server (a router identity: it follows every engine's card).
func (f *relayFlags) registerNATS(fs *pflag.FlagSet) { registerNATSClient(fs, &f.cfg.NATSAuth) }
