package main

import "github.com/spf13/pflag"

// registerNATS binds the options that authenticate the engine to NATS:
// with a server that confines engines to their own subjects, these are the
// engine's identity.
func (f *mockerFlags) registerNATS(fs *pflag.FlagSet) { registerNATSClient(fs, &f.natsAuth) }
