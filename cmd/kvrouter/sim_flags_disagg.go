package main

import "github.com/spf13/pflag"

// registerDisagg registers the replay's disaggregated serving: how many of
// the engines are prefill engines.
func (f *simFlags) registerDisagg(fs *pflag.FlagSet) {
	fs.IntVar(&f.prefillEngines, "prefill-engines", 0, "replay disaggregated: this many of --engines are prefill engines, the others decode (0: aggregated)")
}
