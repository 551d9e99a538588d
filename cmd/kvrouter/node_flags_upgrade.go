package main

import "github.com/spf13/pflag"

// registerUpgrade binds the options of a rolling upgrade: compatibility
// with the engines of the previous protocol version.
func (f *nodeFlags) registerUpgrade(fs *pflag.FlagSet) {
	fs.BoolVar(&f.cfg.Events.RefuseV1Subjects, "refuse-v1-engine-subjects", false, "stop listening on protocol v1's shared worker subjects (kvr.<dc>.workers.register, .heartbeat, .deregister) once every engine publishes on its own kvr.<dc>.workers.<id>.* subjects")
}
