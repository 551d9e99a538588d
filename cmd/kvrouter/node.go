package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/node/extproc"
	"github.com/kvrouter/kvrouter/node/frontend"
	"github.com/kvrouter/kvrouter/node/selection"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// nodeFlags binds every `kvrouter node` option to the node's Config.
type nodeFlags struct {
	daemonFlags
	cfg          node.Config
	kvEvents     bool
	affinityMode string
	decodeFrac   float64
	prefillAbs   int64
	prefillFrac  float64
	ref          referenceFlags // node_flags_reference.go
	queue        queueFlags
	deploy       deployFlags
}

// register registers the node's options group by group; each register
// function holds one group's flags, most used first, which is the order
// the help lists them in.
func (f *nodeFlags) register(fs *pflag.FlagSet) {
	f.cfg = node.DefaultConfig()
	registerGroups(fs, []flagSection{
		{groupGeneral, f.registerGeneral},
		{groupServing, f.registerServing},
		{groupServing, f.registerSelection},
		{groupEngines, f.registerEngines},
		{groupEventPlane, f.registerEventPlane},
		{groupRouting, f.registerRouting},
		{groupSessions, f.registerSessions},
		{groupAdmission, f.registerAdmission},
		{groupCluster, f.registerCluster},
		{groupSecurity, f.registerSecurity},
		{groupSecurity, f.registerSelectionSecurity},
		{groupObservability, f.registerObservability},
		{groupAdvanced, f.registerAdvanced},
		{groupAdvanced, f.registerSelectionAdvanced},
		{groupCompat, f.registerCompat},
		{groupNoEffect, f.registerNoEffect},
	})
}

func (f *nodeFlags) registerGeneral(fs *pflag.FlagSet) {
	c := &f.cfg
	f.registerConfig(fs)
	fs.StringVar(&c.DC, "dc", c.DC, "data center; prefixes NATS subjects (kvr.<dc>)")
	fs.StringVar(&c.NodeID, "node-id", c.NodeID, "name in logs, metrics and --peers")
}

func (f *nodeFlags) registerRouting(fs *pflag.FlagSet) {
	d := &f.cfg.Dispatch
	fs.StringVar(&d.Policy, "router-mode", d.Policy, "routing policy (list in docs/configuration.md)\n"+
		"One of "+strings.Join(policy.Names(), ", ")+"; or the reference's short names "+policyAliases()+".")
	addBool(fs, &f.kvEvents, "kv-events", true, "index engine KV events (false: approximate mode)\n"+
		"In approximate mode the router ignores engine KV events and indexes its own routing decisions.")
	fs.DurationVar(&d.ApproxTTL, "router-ttl", 0, "approximate mode: how long a routed block stays (0: 120s)")
	fs.DurationVar(&d.PredictTTL, "router-predicted-ttl", 0, "predict-on-route side index TTL (0: off; try 5s)\n5s suits bursts of sibling requests.")
	fs.Float64Var(&d.KV.OverlapScoreCredit, "kv-overlap-score-credit", d.KV.OverlapScoreCredit, "credit per cached block on the device (0: none)\nIn the KV cost model; 0 ignores the cache.")
	fs.Float64Var(&d.KV.PrefillLoadScale, "prefill-load-scale", d.KV.PrefillLoadScale, "KV cost model: weight of the prefill term")
	fs.Float64Var(&d.KV.DecodeActiveRequestWeight, "decode-active-request-weight", d.KV.DecodeActiveRequestWeight, "KV cost model: cost of an active request, in blocks")
	fs.Float64Var(&d.KV.Temperature, "router-temperature", d.KV.Temperature, "softmax sampling temperature over costs (0: the cheapest)")
	addBool(fs, &f.ref.loadAware, "load-aware", false, "preset: route by load alone (no overlap credit, no KV events)\n"+
		"KV mode with overlap credit 0, shared-cache credit 0, KV events off, KV reuse not assumed; "+
		"--prefill-load-scale and the host/disk weights keep their values.")
	addBool(fs, &f.ref.agentic, "agentic", false, "preset: credit 2, prefill scale 4, active-request weight 64\n"+
		"Overrides those options; refused together with --load-aware.")
	addBool(fs, &d.DecodeFallback, "decode-fallback", d.DecodeFallback, "no prefill engine left: serve on decode engines\n"+
		"Disaggregated serving. Off, such requests get 503; a request whose prefill hop failed is never served whole.")
}

// policyAliases lists the short policy names with what each stands for.
func policyAliases() string {
	var out []string
	for _, a := range policy.Aliases() {
		out = append(out, a+" ("+policy.Canonical(a)+")")
	}
	return strings.Join(out, ", ")
}

func (f *nodeFlags) registerObservability(fs *pflag.FlagSet) {
	registerObservability(fs, &f.log, &f.cfg.OTLPEndpoint, &f.cfg.Frontend.Edge.AdminAddr)
}

// resolve folds the flag values that need conversion into the config,
// and warns, on log, of the options set that have no effect.
func (f *nodeFlags) resolve(fs *pflag.FlagSet, log *slog.Logger) error {
	d := &f.cfg.Dispatch
	d.ApproximateMode = !f.kvEvents
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
	for _, step := range []func() error{func() error { return f.resolveReference(log) }, f.resolveQueue, f.resolveDeploy} {
		if err := step(); err != nil {
			return err
		}
	}
	warnNoEffect(fs, log)
	return nil
}

func newNodeCmd() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a router node: OpenAI-compatible frontend, KV-aware routing, NATS event plane",
		Long: `node runs one router node of a data center: an OpenAI-compatible frontend that sends
each request to the engine holding the longest cached prefix of its prompt, weighed against
load. Options also come from a YAML file (--config) and KVR_* variables (KVR_HTTP_ADDR for
--http-addr): default < file < environment < flag. See docs/configuration.md.`,
	}
	return newDaemonCmd(cmd, &f.daemonFlags, f.register, func(cmd *cobra.Command, log *slog.Logger) error {
		if err := f.resolve(cmd.Flags(), log); err != nil {
			return err
		}
		n, err := node.New(f.cfg, log)
		if err != nil {
			return explainConfigError(cmd.Flags(), cmp.Or(f.configPath, configFromEnv(environ())), environ(), err)
		}
		return explainListenError(cmd.Flags(), n.Run(cmd.Context()))
	})
}

// registerServing registers the client-facing API's options: where it
// listens, what it accepts and how it drains.
func (f *nodeFlags) registerServing(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "OpenAI-compatible HTTP listen address")
	fs.StringArrayVar(&c.Tokenizers, "tokenizer", nil, "MODEL=DIR: a model's Hugging Face tokenizer (repeatable)\n"+
		"DIR holds the model's tokenizer.json and tokenizer_config.json, so that text prompts are routed by the "+
		"engine's own token blocks; a model without one is routed by text blocks.")
	fs.Int64Var(&c.Frontend.MaxBodyBytes, "max-body-bytes", oaiedge.MaxBodyBytes, "largest request body accepted")
	registerBodyBudgetFlag(fs, &c.Frontend.Edge.MaxBufferedBodyBytes)
	fs.IntVar(&c.Dispatch.MaxPromptTokens, "max-prompt-tokens", c.Dispatch.MaxPromptTokens, "longest prompt accepted, in tokens")
	d := &c.Drain
	fs.DurationVar(&d.ReadyDelay, "drain-ready-delay", 0, "on SIGTERM, keep serving this long after /ready turns 503\n"+
		"So that load balancers stop sending first; 0 closes at once, for a preStop hook that already waits.")
	fs.DurationVar(&d.Timeout, "drain-timeout", frontend.ShutdownTimeout, "on SIGTERM, wait this long for in-flight requests\n"+
		"Streams still running then end with a shutting_down error event.")
}

// registerSessions registers session affinity: how long a session stays
// with its engine and how a request names its session.
func (f *nodeFlags) registerSessions(fs *pflag.FlagSet) {
	d := &f.cfg.Dispatch
	fs.DurationVar(&d.AffinityTTL, "session-affinity-ttl", 0, "keep a session on its engine for this idle time (0: no affinity)\n"+
		"Between 1s and 8760h.")
	fs.StringVar(&f.affinityMode, "session-affinity-mode", "hard", "hard: always its engine; soft: unless busy")
	fs.IntVar(&d.MaxSessions, "max-sessions", d.MaxSessions, "most live session bindings")
	registerSessionKeyFlags(fs, &f.cfg.Frontend.Edge.SessionKeys)
}

// registerSelection registers the selection edges beside the OpenAI
// frontend: the selection API and the gateway's endpoint picker, off by
// default, on loopback when given without an address.
func (f *nodeFlags) registerSelection(fs *pflag.FlagSet) {
	s := &f.cfg.Selection
	fs.BoolVar(&s.NoFrontend, "no-frontend", false, "serve no OpenAI proxy: only the selection API and the picker\n"+
		"Health, readiness, metrics, admin and the API's HTTP/JSON mirror stay on --http-addr.")
	fs.StringVar(&s.Addr, "select-addr", "", "selection API gRPC listen address (alone: "+node.DefaultSelectAddr+")")
	fs.Lookup("select-addr").NoOptDefVal = node.DefaultSelectAddr
	fs.StringVar(&s.ExtProcAddr, "ext-proc-addr", "", "Envoy ext_proc endpoint picker address (alone: "+node.DefaultExtProcAddr+")")
	fs.Lookup("ext-proc-addr").NoOptDefVal = node.DefaultExtProcAddr
}

// registerSelectionSecurity registers the client CA of the selection
// edges' gRPC listeners.
func (f *nodeFlags) registerSelectionSecurity(fs *pflag.FlagSet) {
	fs.StringVar(&f.cfg.Selection.ClientCA, "select-client-ca", "", "PEM CA of the selection and picker clients' certificates\n"+
		"With --tls-cert and --tls-key: mutual TLS, required on a non-loopback --select-addr or --ext-proc-addr.")
}

// registerSelectionAdvanced registers the selection edges' limits and
// failure mode.
func (f *nodeFlags) registerSelectionAdvanced(fs *pflag.FlagSet) {
	s := &f.cfg.Selection
	fs.DurationVar(&s.ExtProc.Deadline, "ext-proc-deadline", extproc.DefaultDeadline, "picker: longest decision after the body\n"+
		"Past it the request gets 504, or falls through with --ext-proc-fail-open.")
	fs.BoolVar(&s.ExtProc.FailOpen, "ext-proc-fail-open", false, "picker: route nothing rather than fail a request\n"+
		"When no engine is free of faults (not when overloaded): the gateway's own balancing applies.")
	fs.IntVar(&s.ExtProc.OverloadStatus, "ext-proc-overload-status", 429, "picker: HTTP status of an overload\nOne Envoy defines (not 529).")
	fs.DurationVar(&s.API.ReservationTTL, "select-reservation-ttl", selection.DefaultReservationTTL, "free an unreleased reservation after it")
	fs.DurationVar(&s.API.SelectionTTL, "select-selection-ttl", selection.DefaultSelectionTTL, "keep a selection for Reserve this long")
}

// registerEngines registers how the node finds and reaches its engines.
func (f *nodeFlags) registerEngines(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringArrayVar(&c.Engines, "engine", nil, "declare an engine: url=URL[,model=M,...] (repeatable)\n"+
		"For engines without kvrouter code, one entry per engine and data-parallel rank: "+
		"url=URL[,model=M][,block-size=16][,kv-events=tcp://h:5557][,replay=tcp://h:5558][,replay-timeout=10s][,metrics=URL|none]"+
		"[,dp-rank=0][,kv-blocks=N][,max-batched-tokens=N][,role=prefill|decode][,bootstrap-port=P][,transfer-domain=D]. "+
		"In KVR_ENGINE, separate entries with ';'.")
	fs.StringArrayVar(&c.EngineDNS, "engine-dns", nil, "find engines by DNS: name=HOST|srv=NAME[,...] (repeatable)\n"+
		"name=HOST (A/AAAA) or srv=NAME, with port=8000, model=M, block-size=16, kv-events-port=P, replay-port=P, replay-timeout=10s, "+
		"metrics-path=/metrics, dp-size=1, scheme=http; re-resolved every 10s.")
	fs.StringVar(&c.EngineDNSServer, "engine-dns-server", "", "DNS server of --engine-dns, host:port (default: the system's)")
	fs.StringVar(&c.Frontend.EngineAPIKey, "engine-api-key", "", "bearer token sent to every engine (prefer KVR_ENGINE_API_KEY)\n"+
		"For engines started with --api-key; flags show in process lists.")
	fs.StringVar(&c.EngineTLSCA, "engine-tls-ca", "", "PEM CA of https engines (default: the system's roots)")
	fs.DurationVar(&c.Events.LivenessTimeout, "liveness-timeout", fleet.DefaultLivenessTimeout, "drop an engine whose heartbeats stop for this long")
}

// registerEventPlane registers the NATS server the engines register and
// publish on: the embedded one or an external one, and their security.
func (f *nodeFlags) registerEventPlane(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.NATS, "nats", c.NATS, `"embedded" (in-process) or nats://host:port`)
	fs.StringVar(&c.NATSListen, "nats-listen", c.NATSListen, "embedded NATS: listen address\nPort 0: any free port.")
	s := &c.NATSSecurity.Server
	fs.StringVar(&s.UsersFile, "nats-users", "", "embedded NATS: YAML file of router and engine credentials\n"+
		"nkey public keys or bcrypt passwords. Set, clients need credentials and each engine may publish only on "+
		"its own subjects (see docs/engines.md).")
	fs.StringVar(&s.TLSCert, "nats-listen-tls-cert", "", "embedded NATS: PEM certificate; the server then speaks TLS only")
	fs.StringVar(&s.TLSKey, "nats-listen-tls-key", "", "embedded NATS: PEM private key of --nats-listen-tls-cert")
	fs.StringVar(&s.TLSCA, "nats-listen-tls-ca", "", "embedded NATS: PEM CA that must sign every client's certificate")
	registerNATSClient(fs, &c.NATSSecurity.Client)
}
