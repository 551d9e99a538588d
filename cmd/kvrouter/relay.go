package main

import (
	"fmt"
	"os"
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
	cfg        service.Config
	configPath string
	peers      []string
	pools      []string
	peersHTTPS bool
	tokenizers []string
	log        logFlags
}

func (f *relayFlags) register(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&f.configPath, "config", "", "YAML file of options (keys as flag names with underscores); precedence: default < file < KVR_* environment < flag")
	fs.StringVar(&c.DC, "dc", "dc1", "this relay's data center")
	fs.StringVar(&c.Name, "name", "", "this relay's name towards its peers (default relay-<dc>)")
	fs.StringVar(&c.NATS, "nats", "nats://127.0.0.1:4222", "the DC's NATS server (engine cards)")
	fs.StringSliceVar(&c.Nodes, "nodes", []string{"http://127.0.0.1:8000"}, "the DC's router nodes' client URLs")
	fs.StringSliceVar(&c.ClusterAPIs, "cluster-apis", []string{"127.0.0.1:7100"}, "the DC's router nodes' cluster API addresses (ownership stream)")
	fs.StringVar(&c.GatewayAddr, "gateway-addr", "127.0.0.1:8080", "the DC's OpenAI-compatible ingress address")
	fs.StringVar(&c.PublishAddr, "publish-addr", "127.0.0.1:7200", "where the DC's summaries are served to other DCs' relays (gRPC)")
	f.registerPeers(fs)
	fs.StringSliceVar(&f.pools, "pools", []string{fmt.Sprintf("%s:%d", mocker.DefaultModel, mocker.DefaultBlockSize)}, "pools summarised and searched, model:block_size each")
	p := &c.Policy
	fs.BoolVar(&p.LocalOnly, "local-only", false, "never forward for prefix reuse (sessions still go to the DC that owns them)")
	fs.Float64Var(&p.PrefillCostPerTokenMs, "prefill-cost-per-token-ms", 0, "prefill time of one prompt token, the worth of a cached token (0: gateway default)")
	fs.Float64Var(&p.UtilizationPenaltyMs, "utilization-penalty-ms", 0, "penalty of a fully utilised DC (0: gateway default)")
	fs.Float64Var(&p.MaxUtilization, "max-utilization", 0, "skip remote DCs at or above this utilization (0: gateway default)")
	fs.DurationVar(&p.MaxStaleness, "max-staleness", 0, "skip remote summaries not heard from for longer (0: gateway default)")
	fs.Float64Var(&p.MinAdvantageMs, "min-advantage-ms", 0, "a remote DC must beat the local one by more than this")
	fs.IntVar(&c.Producer.Filter.Capacity, "summary-capacity", service.DefaultSummaryCapacity, "blocks a pool's summary holds before it grows")
	c.Producer.Filter.Kind = filter.KindCuckoo
	fs.Var(summaryKind{&c.Producer.Filter.Kind}, "summary-kind", "the pools' summary filter: cuckoo (16-bit fingerprints, ~1.2e-4 false positives, 16.8 bits per block), cuckoo-compact (semi-sorted, ~9.3e-4, 12.6 bits per block) or bloom (no deletes: rebuilt and re-sent whole when a quarter of its entries are removed blocks; for pools that rarely evict)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", time.Second, "how often summaries carry the pools' load to peers")
	fs.StringVar(&c.ClusterTLS.Cert, "cluster-tls-cert", "", "PEM certificate presented to the DC's cluster API when its nodes run with --cluster-tls-* (with --cluster-tls-key and --cluster-tls-ca)")
	fs.StringVar(&c.ClusterTLS.Key, "cluster-tls-key", "", "PEM private key of --cluster-tls-cert")
	fs.StringVar(&c.ClusterTLS.CA, "cluster-tls-ca", "", "PEM CA certificate of the DC's cluster")
	fs.StringVar(&c.WANTLS.Cert, "wan-tls-cert", "", "PEM certificate of this relay for mutual TLS on the summary publication between DCs (with --wan-tls-key and --wan-tls-ca)")
	fs.StringVar(&c.WANTLS.Key, "wan-tls-key", "", "PEM private key of --wan-tls-cert")
	fs.StringVar(&c.WANTLS.CA, "wan-tls-ca", "", "PEM CA certificate that signs every relay's WAN certificate")
	fs.StringVar(&c.GatewayTLSCert, "gateway-tls-cert", "", "PEM certificate: serve the gateway over HTTPS (with --gateway-tls-key)")
	fs.StringVar(&c.GatewayTLSKey, "gateway-tls-key", "", "PEM private key of --gateway-tls-cert")
	fs.BoolVar(&f.peersHTTPS, "peer-gateways-https", false, "reach the peers' gateways over HTTPS (they run with --gateway-tls-*), trusting --wan-tls-ca when set, else the system's roots")
	fs.StringArrayVar(&f.tokenizers, "tokenizer", nil, "MODEL=DIR (repeatable): the model's Hugging Face tokenizer files, so text prompts are searched by the engines' token blocks (without one a text prompt is served locally)")
	f.registerNATS(fs)
	f.registerEdges(fs)
	f.registerSecurity(fs)
	f.registerTelemetry(fs)
	f.registerBodies(fs)
	f.log.register(fs)
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
Precedence: default < file < environment < flag.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolveConfig(cmd.Flags(), f.configPath, environ()); err != nil {
				return err
			}
			if err := f.resolve(); err != nil {
				return err
			}
			log, err := f.log.logger(os.Stderr)
			if err != nil {
				return err
			}
			f.cfg.Log = log
			r, err := service.New(f.cfg)
			if err != nil {
				return err
			}
			return explainListenError(cmd.Flags(), r.Run(cmd.Context()))
		},
	}
	f.register(cmd.Flags())
	installHelp(cmd)
	return cmd
}
