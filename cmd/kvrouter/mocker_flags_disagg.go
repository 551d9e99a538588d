package main

import (
	"github.com/spf13/pflag"
)

// registerDisagg registers the simulated engine's part in disaggregated
// serving: its role and the hand-off it speaks.
func (f *mockerFlags) registerDisagg(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.Role, "role", "aggregated", "worker type: aggregated, prefill or decode\n"+
		"Declared in the card (worker_type); routers pair prefill and decode engines of a model.")
	fs.IntVar(&c.BootstrapPort, "bootstrap-port", 0, "prefill: SGLang bootstrap server port (0: vLLM hand-off)\n"+
		"Served on the HTTP listener's host; the card declares it.")
	fs.StringVar(&c.TransferDomain, "transfer-domain", "", "topology domain of KV transfers, declared in the card")
}

// registerDisaggTiming registers the KV transfer's timing and the
// bootstrap wait, tuning rarely changed.
func (f *mockerFlags) registerDisaggTiming(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.DurationVar(&c.BootstrapTimeout, "bootstrap-timeout", c.BootstrapTimeout, "decode: wait for a room's prefill")
	fs.Float64Var(&c.Engine.Timing.KVTransferNanos, "kv-transfer-ns-per-token", c.Engine.Timing.KVTransferNanos,
		"decode: KV transfer ns per token")
	fs.DurationVar(&c.Engine.Timing.KVTransferLatency, "kv-transfer-latency", c.Engine.Timing.KVTransferLatency,
		"decode: fixed cost of a KV transfer")
}
