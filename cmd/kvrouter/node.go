package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/node/frontend"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// nodeFlags binds every `kvrouter node` option to the node's Config.
type nodeFlags struct {
	cfg          node.Config
	configPath   string
	affinityMode string
	decodeFrac   float64
	prefillAbs   int64
	prefillFrac  float64
	log          logFlags
	ref          referenceFlags // node_flags_reference.go
	queue        queueFlags
	deploy       deployFlags
}

func (f *nodeFlags) register(fs *pflag.FlagSet) {
	c := &f.cfg
	*c = node.DefaultConfig()
	d := &c.Dispatch
	fs.StringVar(&f.configPath, "config", "", "YAML file of options (keys as flag names with underscores); precedence: default < file < KVR_* environment < flag")
	fs.StringVar(&c.DC, "dc", c.DC, "data center name; prefixes every NATS subject (kvr.<dc>)")
	fs.StringVar(&c.NodeID, "node-id", c.NodeID, "this node's name in logs and metrics")
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "client-facing OpenAI-compatible HTTP address")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate: serve the client-facing API over HTTPS (with --tls-key)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.EngineTLSCA, "engine-tls-ca", "", "PEM CA certificate of engines served over https (default: the system's roots)")
	fs.BoolVar(&c.Frontend.EngineCleartextHTTP2, "engine-h2c", false, "speak HTTP/2 by prior knowledge to http:// engines (default HTTP/1.1; https engines use HTTP/2 when they offer it)")
	fs.StringVar(&c.NATS, "nats", c.NATS, `NATS server: "embedded" runs one in-process, or nats://host:port`)
	fs.StringVar(&c.NATSListen, "nats-listen", c.NATSListen, "listen address of the embedded NATS server (port 0: any free port)")
	fs.StringArrayVar(&c.Engines, "engine", nil, "declare an engine without kvrouter code (repeatable, one per engine and data-parallel rank): url=URL[,model=M][,block-size=16][,kv-events=tcp://h:5557][,replay=tcp://h:5558][,replay-timeout=10s][,metrics=URL|none][,dp-rank=0][,kv-blocks=N][,max-batched-tokens=N]; in KVR_ENGINE separate entries with ';'")
	fs.StringArrayVar(&c.EngineDNS, "engine-dns", nil, "find engines by DNS (repeatable): name=HOST (A/AAAA) or srv=NAME, with port=8000, model=M, block-size=16, kv-events-port=P, replay-port=P, replay-timeout=10s, metrics-path=/metrics, dp-size=1, scheme=http; re-resolved every 10s")
	fs.StringVar(&c.EngineDNSServer, "engine-dns-server", "", "host:port of the DNS server --engine-dns asks (default: the system's resolver)")
	fs.StringArrayVar(&c.Tokenizers, "tokenizer", nil, "MODEL=DIR (repeatable): the model's Hugging Face tokenizer.json and tokenizer_config.json, so text prompts are routed by the engine's own token blocks (without one: text blocks)")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "export request spans to this OTLP collector: host:port (gRPC, cleartext) or an http:// or https:// URL (protocol from OTEL_EXPORTER_OTLP_PROTOCOL, gRPC by default); empty: the OTEL_* environment decides, off without it")
	cc := &c.Cluster
	fs.StringVar(&cc.RaftAddr, "raft-addr", "", "run as a member of the DC's raft cluster, with raft on this address (off when empty)")
	fs.StringVar(&cc.APIAddr, "cluster-api-addr", "", "cluster API (gRPC: write forwarding, kvrouter cluster) listen address")
	fs.StringVar(&cc.DataDir, "data-dir", "", "directory of the raft log, the replicated tables and snapshots (empty: in memory, lost on restart)")
	fs.StringSliceVar(&cc.Peers, "peers", nil, "static cluster members, id=raft_addr/api_addr each (comma-separated), this node included")
	fs.BoolVar(&cc.Bootstrap, "bootstrap", false, "bootstrap a new cluster from --peers when the data dir is empty (safe on every static member)")
	fs.StringVar(&cc.Join, "join", "", "cluster API address of a member to ask for membership when the data dir is empty")
	fs.StringVar(&cc.TLSCert, "cluster-tls-cert", "", "PEM certificate of this member for mutual TLS on raft and the cluster API (with --cluster-tls-key and --cluster-tls-ca)")
	fs.StringVar(&cc.TLSKey, "cluster-tls-key", "", "PEM private key of --cluster-tls-cert")
	fs.StringVar(&cc.TLSCA, "cluster-tls-ca", "", "PEM CA certificate that signs every member's certificate")
	fs.DurationVar(&cc.HeartbeatTimeout, "raft-heartbeat-timeout", 0, "raft follower heartbeat timeout: a follower calls an election after 1-3 times it without a leader (0: 500ms)")
	fs.DurationVar(&cc.ElectionTimeout, "raft-election-timeout", 0, "raft candidate election timeout: a candidate retries after 1-2 times it without a majority (0: 500ms)")
	fs.StringVar(&d.Policy, "router-mode", d.Policy, "routing policy: "+strings.Join(policy.Names(), ", "))
	fs.BoolVar(&d.ApproximateMode, "no-kv-events", false, "approximate mode: ignore engine KV events and index the router's own decisions")
	fs.DurationVar(&d.ApproxTTL, "router-ttl", 0, "approximate-mode retention of a routed block (0: 120s)")
	fs.DurationVar(&d.PredictTTL, "router-predicted-ttl", 0, "predict-on-route side index TTL; 0 disables it (5s is a good value for sibling bursts)")
	fs.Float64Var(&d.KV.OverlapScoreCredit, "kv-overlap-score-credit", d.KV.OverlapScoreCredit, "credit per cached device block in the KV cost model (0 ignores the cache)")
	fs.Float64Var(&d.KV.OverlapScoreCreditDecay, "kv-overlap-score-credit-decay", d.KV.OverlapScoreCreditDecay, "decay of the device credit with excess active prefill")
	fs.Float64Var(&d.KV.PrefillLoadScale, "prefill-load-scale", d.KV.PrefillLoadScale, "weight of the prefill term of the KV cost model")
	fs.Float64Var(&d.KV.HostCacheHitWeight, "host-cache-hit-weight", d.KV.HostCacheHitWeight, "credit per cached host-tier block, in [0,1]")
	fs.Float64Var(&d.KV.DiskCacheHitWeight, "disk-cache-hit-weight", d.KV.DiskCacheHitWeight, "credit per cached disk-tier block, in [0,1]")
	fs.Float64Var(&d.KV.DecodeActiveRequestWeight, "decode-active-request-weight", d.KV.DecodeActiveRequestWeight, "block-equivalent cost per active request")
	fs.Float64Var(&d.KV.Temperature, "router-temperature", d.KV.Temperature, "softmax sampling temperature over costs; 0 picks the cheapest")
	fs.Float64Var(&f.decodeFrac, "active-decode-blocks-threshold", -1, "busy above this fraction of KV capacity in active decode blocks (negative: off)")
	fs.Int64Var(&f.prefillAbs, "active-prefill-tokens-threshold", -1, "busy above this many active prefill tokens (negative: off)")
	fs.Float64Var(&f.prefillFrac, "active-prefill-tokens-threshold-frac", -1, "busy above this multiple of max_num_batched_tokens in active prefill tokens (negative: off)")
	fs.DurationVar(&d.AffinityTTL, "session-affinity-ttl", 0, "enable session affinity with this idle TTL (1s..8760h); 0 disables it")
	fs.StringVar(&f.affinityMode, "session-affinity-mode", "hard", "hard: a bound session always goes to its engine; soft: unless it is busy")
	fs.IntVar(&d.MaxSessions, "max-sessions", d.MaxSessions, "most live session bindings")
	fs.IntVar(&d.MaxPromptTokens, "max-prompt-tokens", d.MaxPromptTokens, "longest prompt accepted, in tokens")
	fs.Uint64Var(&d.Seed, "seed", 0, "seed of the selectors' random tie-breaks, fixed so that decisions are reproducible")
	fs.Int64Var(&c.Frontend.MaxBodyBytes, "max-body-bytes", oaiedge.MaxBodyBytes, "largest request body accepted")
	fs.IntVar(&c.Frontend.OverloadStatus, "overload-status", frontend.OverloadStatus, "HTTP status when every engine is over its busy thresholds")
	fs.StringVar(&c.Frontend.EngineAPIKey, "engine-api-key", "", "bearer token sent to every engine, for engines started with --api-key (prefer KVR_ENGINE_API_KEY: flags show in process lists)")
	fs.DurationVar(&c.Events.LivenessTimeout, "liveness-timeout", fleet.DefaultLivenessTimeout, "drop an engine whose heartbeats stop for this long")
	fs.DurationVar(&c.Events.SnapshotTimeout, "snapshot-timeout", fleet.DefaultSnapshotTimeout, "wait this long for an engine's KV snapshot during a resync")
	f.registerNATS(fs)
	f.registerEdges(fs)
	f.registerOps(fs)
	f.registerSecurity(fs)
	f.registerReference(fs)
	f.log.register(fs)
	f.registerQueue(fs)
	f.registerDeploy(fs)
	f.registerUpgrade(fs)
	f.registerBodies(fs)
	f.registerRecovery(fs)
}

// resolve folds the flag values that need conversion into the config.
func (f *nodeFlags) resolve() error {
	d := &f.cfg.Dispatch
	if err := d.AffinityMode.UnmarshalText([]byte(f.affinityMode)); err != nil {
		return fmt.Errorf("--session-affinity-mode: %w", err)
	}
	if f.decodeFrac >= 0 {
		d.Thresholds.ActiveDecodeBlocks = &f.decodeFrac
	}
	if f.prefillAbs >= 0 {
		d.Thresholds.ActivePrefillTokens = &f.prefillAbs
	}
	if f.prefillFrac >= 0 {
		d.Thresholds.ActivePrefillTokensFrac = &f.prefillFrac
	}
	if err := f.resolveReference(); err != nil {
		return err
	}
	if err := f.resolveQueue(); err != nil {
		return err
	}
	return f.resolveDeploy()
}

func newNodeCmd() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a router node: OpenAI-compatible frontend, KV-aware routing, NATS event plane",
		Long: `node runs one router node of a data center. Clients speak the OpenAI API to it
(/v1/chat/completions, /v1/completions, /v1/models); it routes each request to the engine
that holds the longest cached prefix of the prompt, weighed against load, and proxies the
response with streaming. Engines register and publish their KV cache events over NATS.

Every option can also be set in a YAML file (--config) or a KVR_* environment variable
(KVR_HTTP_ADDR for --http-addr). Precedence: default < file < environment < flag.`,
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
			n, err := node.New(f.cfg, log)
			if err != nil {
				return explainConfigError(cmd.Flags(), cmp.Or(f.configPath, configFromEnv(environ())), environ(), err)
			}
			return explainListenError(cmd.Flags(), n.Run(cmd.Context()))
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// logFlags are the logging options every long-running subcommand shares.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "text or json")
}

func (l *logFlags) logger(w *os.File) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch l.format {
	case "text":
		return slog.New(newDedupHandler(slog.NewTextHandler(w, opts))), nil
	case "json":
		return slog.New(newDedupHandler(slog.NewJSONHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}
