package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/node"
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
	if err := f.resolveReference(log); err != nil {
		return err
	}
	if err := f.resolveQueue(); err != nil {
		return err
	}
	if err := f.resolveDeploy(); err != nil {
		return err
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
