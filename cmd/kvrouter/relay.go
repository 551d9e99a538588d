package main

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/gateway"
	"github.com/kvrouter/kvrouter/relay/service"
	"github.com/kvrouter/kvrouter/tokenize"
)

// relayFlags binds every `kvrouter relay` option to the relay's Config.
type relayFlags struct {
	daemonFlags
	cfg        service.Config
	peers      []string
	pools      []string
	peersHTTPS bool
	tokenizers []string
}

// register registers the relay's options group by group, in the order
// the help lists them.
func (f *relayFlags) register(fs *pflag.FlagSet) {
	registerGroups(fs, []flagSection{
		{groupGeneral, f.registerGeneral},
		{groupServing, f.registerServing},
		{groupFederation, f.registerFederation},
		{groupEventPlane, f.registerEventPlane},
		{groupSecurity, f.registerSecurity},
		{groupObservability, f.registerObservability},
	})
}

func (f *relayFlags) registerGeneral(fs *pflag.FlagSet) {
	c := &f.cfg
	f.registerConfig(fs)
	fs.StringVar(&c.DC, "dc", "dc1", "this relay's data center")
	fs.StringVar(&c.Name, "name", "", "this relay's name towards its peers (default relay-<dc>)")
}

// registerServing registers the DC's ingress: where it listens, the
// router nodes behind it and what it accepts.
func (f *relayFlags) registerServing(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.GatewayAddr, "gateway-addr", "127.0.0.1:8080", "the DC's OpenAI-compatible ingress")
	fs.StringSliceVar(&c.Nodes, "nodes", []string{"http://127.0.0.1:8000"}, "URLs of the DC's router nodes")
	fs.StringSliceVar(&c.ClusterAPIs, "cluster-apis", []string{"127.0.0.1:7100"}, "cluster APIs of the DC's nodes\n"+
		"The relay follows the DC's block ownership from them.")
	fs.StringArrayVar(&f.tokenizers, "tokenizer", nil, "MODEL=DIR: a model's Hugging Face tokenizer (repeatable)\n"+
		"So that text prompts are searched by the engines' token blocks; without one a text prompt is served locally.")
	registerBodyBudgetFlag(fs, &c.Edge.MaxBufferedBodyBytes)
	registerSessionKeyFlags(fs, &c.Edge.SessionKeys)
}

// registerEventPlane registers the DC's NATS server, where the relay
// follows the engines' cards, and how it authenticates there (a router
// identity).
func (f *relayFlags) registerEventPlane(fs *pflag.FlagSet) {
	fs.StringVar(&f.cfg.NATS, "nats", "nats://127.0.0.1:4222", "the DC's NATS server\nWhere the relay follows the engines' cards.")
	registerNATSClient(fs, &f.cfg.NATSAuth)
}

func (f *relayFlags) registerObservability(fs *pflag.FlagSet) {
	registerObservability(fs, &f.log, &f.cfg.OTLPEndpoint, &f.cfg.Edge.AdminAddr)
}

// summaryKind is --summary-kind. It parses when it is set, so that a bad
// value from the file or the environment is reported with its key.
type summaryKind struct{ k *filter.Kind }

func (v summaryKind) String() string {
	if v.k == nil {
		return filter.KindCuckoo.String()
	}
	return v.k.String()
}

func (v summaryKind) Set(s string) error {
	k, err := filter.ParseKind(s)
	if err != nil {
		return err
	}
	*v.k = k
	return nil
}

func (v summaryKind) Type() string { return "kind" }

// resolve parses the peers and pools.
func (f *relayFlags) resolve() error {
	for _, s := range f.peers {
		dc, rest, ok := strings.Cut(s, "=")
		parts := strings.Split(rest, "/")
		if !ok || dc == "" || len(parts) != 3 {
			return fmt.Errorf("--peer-dcs: %q is not dc=publish_addr/gateway_addr/wan_rtt", s)
		}
		rtt, err := time.ParseDuration(parts[2])
		if err != nil || rtt < 0 {
			return fmt.Errorf("--peer-dcs: %q: wan_rtt %q is not a duration", s, parts[2])
		}
		scheme := "http://"
		if f.peersHTTPS {
			scheme = "https://"
		}
		f.cfg.Peers = append(f.cfg.Peers, service.Peer{DC: dc, PublishAddr: parts[0], GatewayURL: scheme + parts[1], WANRTT: rtt})
	}
	for _, s := range f.pools {
		i := strings.LastIndex(s, ":")
		bs, err := strconv.Atoi(s[i+1:])
		if i <= 0 || err != nil || bs <= 0 {
			return fmt.Errorf("--pools: %q is not model:block_size", s)
		}
		f.cfg.Pools = append(f.cfg.Pools, gateway.Pool{Model: s[:i], BlockSize: bs})
	}
	var err error
	if f.cfg.Tokenizers, err = tokenize.LoadModels(f.tokenizers); err != nil {
		return fmt.Errorf("--tokenizer %w", err)
	}
	return nil
}

func newRelayCmd() *cobra.Command {
	var f relayFlags
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Run a DC's relay: cross-DC prefix summaries and the DC's OpenAI ingress gateway",
		Long: `relay runs one DC's relay. It follows the DC's replicated block ownership from the
router nodes' cluster API, publishes a compact summary of it per pool to the other DCs'
relays, follows theirs, and serves the DC's OpenAI-compatible ingress: each request goes
to the DC that holds its longest prefix when that is worth the WAN round trip, at most one
hop away, and is then routed within that DC by its router cluster. Sessions are served by
one DC only.

Every option can also be set in a YAML file (--config) or a KVR_* environment variable.
Precedence: default < file < environment < flag. See docs/configuration.md.`,
	}
	return newDaemonCmd(cmd, &f.daemonFlags, f.register, func(cmd *cobra.Command, log *slog.Logger) error {
		if err := f.resolve(); err != nil {
			return err
		}
		f.cfg.Log = log
		r, err := service.New(f.cfg)
		if err != nil {
			return err
		}
		return explainListenError(cmd.Flags(), r.Run(cmd.Context()))
	})
}

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
