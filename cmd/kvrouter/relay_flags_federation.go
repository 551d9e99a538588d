package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/service"
)

// registerFederation registers what the relay publishes to the other DCs,
// which DCs it follows, and when it forwards a request to one of them.
func (f *relayFlags) registerFederation(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.PublishAddr, "publish-addr", "127.0.0.1:7200", "gRPC address of this DC's summaries\n"+
		"The other DCs' relays subscribe to it.")
	f.registerPeers(fs)
	fs.StringSliceVar(&f.pools, "pools", []string{fmt.Sprintf("%s:%d", mocker.DefaultModel, mocker.DefaultBlockSize)}, "pools summarised, model:block_size each (default: the mocker's)\n"+
		"Summarised and searched. The default is the mocker's model and block size.")
	c.Producer.Filter.Kind = filter.KindCuckoo
	fs.Var(summaryKind{&c.Producer.Filter.Kind}, "summary-kind", "filter: cuckoo, cuckoo-compact or bloom\n"+
		"cuckoo: 16-bit fingerprints, ~1.2e-4 false positives, 16.8 bits per block. cuckoo-compact: semi-sorted, "+
		"~9.3e-4, 12.6 bits per block. bloom: no deletes, so it is rebuilt and re-sent whole when a quarter of "+
		"its entries are removed blocks; for pools that rarely evict.")
	fs.IntVar(&c.Producer.Filter.Capacity, "summary-capacity", service.DefaultSummaryCapacity, "blocks a pool's summary holds before it grows")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", time.Second, "how often summaries carry the pools' load to peers")
	p := &c.Policy
	fs.BoolVar(&p.LocalOnly, "local-only", false, "never forward for prefix reuse (sessions still may)\n"+
		"A session still goes to the DC that owns it.")
	fs.Float64Var(&p.PrefillCostPerTokenMs, "prefill-cost-per-token-ms", 0, "prefill time of a prompt token (0: gateway default)\n"+
		"The worth of a cached token.")
	fs.Float64Var(&p.UtilizationPenaltyMs, "utilization-penalty-ms", 0, "penalty of a fully utilised DC (0: gateway default)")
	fs.Float64Var(&p.MaxUtilization, "max-utilization", 0, "skip remote DCs this busy (0: gateway default)\n"+
		"At or above this utilization.")
	fs.DurationVar(&p.MaxStaleness, "max-staleness", 0, "skip summaries silent for longer (0: gateway default)")
	fs.Float64Var(&p.MinAdvantageMs, "min-advantage-ms", 0, "a remote DC must beat the local one by more than this")
}
