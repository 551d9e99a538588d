package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// referenceFlags are the options that take the reference router's names:
// its flags (with their --no- forms and deprecated aliases), presets,
// tracking toggles and keyed tracking hashes, so that its command lines
// work unchanged. Options kvrouter had under another name are aliases of
// that option. Options whose mechanism kvrouter lacks are accepted, and a
// WARN at startup says they have no effect when set away from their
// default (docs/configuration.md lists them).
type referenceFlags struct {
	loadAware, agentic bool
	overlapWeight      float64 // deprecated; negative: unset
	trackActiveBlocks  bool
	assumeKVReuse      bool
	trackPrefill       bool
	trackOutput        bool
	trackingHash       string
	trackingKeyFile    string
	trackingKeyID      string
	sharedCacheType    string
	sharedCacheMult    float64
	approxPolicy       string
	prefillLoadModel   string
	stride             int
	minInitialWorkers  int
	eventThreads       int
	noEffect           map[string]*bool // accepted boolean options without a mechanism here
	deprecated         map[string]*bool // deprecated boolean options without a mechanism here
}

// noEffectBools are reference options that kvrouter accepts but does not
// act on; see docs/configuration.md for why each is safe to ignore.
var noEffectBools = []struct{ name, usage string }{
	{"router-replica-sync", "reference: sync active sequences between routers (a kvrouter cluster replicates bindings through raft; load is per node plus engine reports)"},
	{"decode-fallback", "reference: fall back to aggregated serving without prefill workers (kvrouter routes aggregated only)"},
	{"router-conditional-disagg", "reference: conditional disaggregation (not supported: kvrouter routes aggregated only)"},
	{"router-prefill-continue", "reference: let prefill workers finish responses (not supported: aggregated only)"},
	{"serve-indexer", "reference: serve the indexer to other routers (kvrouter replicates the index through raft)"},
	{"use-remote-indexer", "reference: query a remote indexer (kvrouter keeps its own, raft-fed)"},
}

// deprecatedBools are reference options it deprecated and dropped.
var deprecatedBools = []struct{ name, usage string }{
	{"router-durable-kv-events", "deprecated: JetStream-durable KV events (no effect)"},
	{"router-reset-states", "deprecated: purge JetStream router state at start (no effect)"},
}

// registerReference registers the reference-named options.
func (f *nodeFlags) registerReference(fs *pflag.FlagSet) {
	r, d := &f.ref, &f.cfg.Dispatch
	for _, a := range [][3]string{
		{"router-kv-overlap-score-credit", "kv-overlap-score-credit", "reference name of --kv-overlap-score-credit"},
		{"router-kv-overlap-score-credit-decay", "kv-overlap-score-credit-decay", "reference name of --kv-overlap-score-credit-decay"},
		{"router-prefill-load-scale", "prefill-load-scale", "reference name of --prefill-load-scale"},
		{"router-host-cache-hit-weight", "host-cache-hit-weight", "reference name of --host-cache-hit-weight"},
		{"router-disk-cache-hit-weight", "disk-cache-hit-weight", "reference name of --disk-cache-hit-weight"},
		{"router-decode-active-request-weight", "decode-active-request-weight", "reference name of --decode-active-request-weight"},
		{"router-session-affinity-mode", "session-affinity-mode", "reference name of --session-affinity-mode"},
		{"no-router-kv-events", "no-kv-events", "reference name of --no-kv-events"},
	} {
		addAlias(fs, a[0], a[1], a[2])
	}
	ev := fs.VarPF(negatedBool{p: &d.ApproximateMode, canon: "no-kv-events"}, "router-kv-events", "", "consume the engines' KV events (false: approximate mode, as --no-kv-events)")
	ev.NoOptDefVal, ev.DefValue = "true", "true"
	addSeconds(fs, &d.ApproxTTL, "router-ttl-secs", "router-ttl", "reference form of --router-ttl, in seconds")
	addSeconds(fs, &d.PredictTTL, "router-predicted-ttl-secs", "router-predicted-ttl", "reference form of --router-predicted-ttl, in seconds")
	addSeconds(fs, &d.AffinityTTL, "router-session-affinity-ttl-secs", "session-affinity-ttl", "reference form of --session-affinity-ttl, in seconds")
	addSeconds(fs, &d.MaxRequestAge, "router-active-request-expiry-secs", "", "free a request whose completion never arrived after this many seconds (0: never)")
	addBool(fs, &r.loadAware, "load-aware", false, "preset: KV mode with no overlap credit, KV events off, KV reuse not assumed; keeps prefill scale and host/disk weights")
	addBool(fs, &r.agentic, "agentic", false, "preset: overlap credit 2, prefill load scale 4, decode active-request weight 64 (overrides those flags)")
	addBool(fs, &r.trackActiveBlocks, "router-track-active-blocks", true, "count the KV blocks of in-flight requests per worker (always on here; off is refused)")
	addBool(fs, &r.assumeKVReuse, "router-assume-kv-reuse", true, "de-duplicate prompt blocks shared by in-flight requests on a worker")
	addBool(fs, &r.trackPrefill, "router-track-prefill-tokens", true, "count uncached prompt tokens as load until the first output token")
	addBool(fs, &r.trackOutput, "router-track-output-blocks", false, "add a block of load each time a request's output crosses a block boundary")
	fs.Float64Var(&r.overlapWeight, "router-kv-overlap-score-weight", -1, "deprecated: non-zero sets --prefill-load-scale; 0 sets it and the overlap credit to 0 (negative: unset)")
	addAlias(fs, "kv-overlap-score-weight", "router-kv-overlap-score-weight", "deprecated name of --router-kv-overlap-score-weight")
	f.registerReferenceMore(fs)
}

// registerReferenceMore registers the remaining reference options and the
// library knobs that had no flag.
func (f *nodeFlags) registerReferenceMore(fs *pflag.FlagSet) {
	r, d := &f.ref, &f.cfg.Dispatch
	fs.StringVar(&r.trackingHash, "router-tracking-hash", routing.TrackingPublic, "identities of in-flight requests: "+routing.TrackingPublic+" or "+routing.TrackingKeyed)
	fs.StringVar(&r.trackingKeyFile, "router-tracking-key-file", "", "file of exactly 32 raw key bytes for "+routing.TrackingKeyed)
	fs.StringVar(&r.trackingKeyID, "router-tracking-key-id", "", "non-empty id (epoch) of the tracking key")
	fs.StringVar(&r.sharedCacheType, "shared-cache-type", "none", "external shared KV cache: none or hicache")
	fs.Float64Var(&r.sharedCacheMult, "shared-cache-multiplier", 0.5, "credit per shared-cache block beyond the device prefix (with --shared-cache-type other than none)")
	fs.StringVar(&r.approxPolicy, "router-approximate-cache-policy", "ttl", "approximate-mode forgetting: ttl (lru is accepted and runs as ttl here)")
	fs.StringVar(&r.prefillLoadModel, "router-prefill-load-model", "none", "prefill load model: none (aic is not supported)")
	fs.IntVar(&r.stride, "router-active-sequence-stride", 1, "keep one active-sequence hash per N prompt blocks (1 here: every block)")
	fs.IntVar(&r.minInitialWorkers, "router-min-initial-workers", 0, "wait for this many workers at startup (accepted; kvrouter serves as soon as any engine registers)")
	fs.IntVar(&r.eventThreads, "router-event-threads", 4, "indexer threads (accepted; kvrouter's index needs no thread setting)")
	fs.Float64Var(&d.DeviceAware.AcceleratorWeight, "encoder-cuda-to-cpu-ratio", d.DeviceAware.AcceleratorWeight, "device-aware-weighted: capacity of a non-CPU worker relative to a CPU worker")
	fs.Float64Var(&d.TwoTier.CacheThreshold, "two-tier-cache-threshold", d.TwoTier.CacheThreshold, "two-tier: cached fraction above which the cache tier decides, in [0,1]")
	fs.Int64Var(&d.TwoTier.BalanceAbsThreshold, "two-tier-balance-abs-threshold", d.TwoTier.BalanceAbsThreshold, "two-tier: spread of active requests above which load decides")
	fs.Float64Var(&d.TwoTier.BalanceRelThreshold, "two-tier-balance-rel-threshold", d.TwoTier.BalanceRelThreshold, "two-tier: max/min ratio of active requests that must also be exceeded, >= 1")
	fs.Float64Var(&d.TwoTier.HostCacheWeight, "two-tier-host-cache-weight", d.TwoTier.HostCacheWeight, "two-tier: weight of the host-memory run in the cache tier, in [0,1]")
	r.noEffect, r.deprecated = map[string]*bool{}, map[string]*bool{}
	for _, b := range noEffectBools {
		r.noEffect[b.name] = new(bool)
		addBool(fs, r.noEffect[b.name], b.name, false, b.usage)
	}
	for _, b := range deprecatedBools {
		r.deprecated[b.name] = new(bool)
		addBool(fs, r.deprecated[b.name], b.name, false, b.usage)
	}
}

// errReference is the class of invalid reference options; messages name
// the flag.
var errReference = errors.New("invalid option")

// resolveReference folds the reference options into the configuration:
// deprecated aliases, presets, tracking toggles and the tracking key.
// Errors name the flag.
func (f *nodeFlags) resolveReference() error {
	r, d := &f.ref, &f.cfg.Dispatch
	for _, step := range []func() error{f.resolveDeprecated, f.resolvePresets, f.resolveTracking, f.resolveTrackingKey, f.resolveAccepted} {
		if err := step(); err != nil {
			return err
		}
	}
	d.KV.TrackPrefillTokens = r.trackPrefill
	return nil
}

// resolveDeprecated applies --router-kv-overlap-score-weight, which takes
// precedence over the options that replaced it, as in the reference.
func (f *nodeFlags) resolveDeprecated() error {
	r, d := &f.ref, &f.cfg.Dispatch
	for name, p := range r.deprecated {
		if *p {
			slog.Warn("deprecated option has no effect", "option", "--"+name)
		}
	}
	if r.overlapWeight < 0 {
		return nil
	}
	slog.Warn("deprecated option: use --router-prefill-load-scale and --router-kv-overlap-score-credit", "option", "--router-kv-overlap-score-weight")
	d.KV.PrefillLoadScale = r.overlapWeight
	if r.overlapWeight == 0 {
		d.KV.OverlapScoreCredit = 0
	}
	return nil
}

// resolvePresets applies --load-aware and --agentic.
func (f *nodeFlags) resolvePresets() error {
	r, d := &f.ref, &f.cfg.Dispatch
	switch {
	case r.loadAware && r.agentic:
		return fmt.Errorf("%w: --load-aware and --agentic exclude each other", errReference)
	case r.loadAware:
		d.Policy = policy.NameKV
		d.KV.OverlapScoreCredit, d.KV.SharedCacheMultiplier = 0, 0
		d.ApproximateMode, d.PredictTTL = true, 0
		r.assumeKVReuse, r.trackPrefill, r.trackActiveBlocks = false, true, true
	case r.agentic:
		d.KV.OverlapScoreCredit, d.KV.PrefillLoadScale, d.KV.DecodeActiveRequestWeight = 2, 4, 64
	}
	return nil
}

// resolveTracking applies the load tracker's toggles and the shared cache.
func (f *nodeFlags) resolveTracking() error {
	r, d := &f.ref, &f.cfg.Dispatch
	if !r.trackActiveBlocks {
		return fmt.Errorf("%w: --no-router-track-active-blocks: kvrouter always tracks active blocks (its cost model and busy thresholds need them)", errReference)
	}
	d.Tracking = policy.Tracking{NoKVReuse: !r.assumeKVReuse, NoPrefillTokens: !r.trackPrefill, OutputBlocks: r.trackOutput}
	switch r.sharedCacheType {
	case "none":
	case "hicache":
		d.KV.SharedCacheMultiplier = r.sharedCacheMult
		slog.Warn("--shared-cache-type hicache: kvrouter has no shared-cache source, so no request gets shared-cache credit")
	default:
		return fmt.Errorf("%w: --shared-cache-type %q: want none or hicache", errReference, r.sharedCacheType)
	}
	if r.stride < 1 {
		return fmt.Errorf("%w: --router-active-sequence-stride %d: must be >= 1", errReference, r.stride)
	}
	return nil
}

// resolveTrackingKey reads the tracking key of keyed-xxh3-v1.
func (f *nodeFlags) resolveTrackingKey() error {
	r, d := &f.ref, &f.cfg.Dispatch
	switch r.trackingHash {
	case routing.TrackingPublic:
		if r.trackingKeyFile != "" || r.trackingKeyID != "" {
			return fmt.Errorf("%w: --router-tracking-key-file and --router-tracking-key-id need --router-tracking-hash %s", errReference, routing.TrackingKeyed)
		}
		return nil
	case routing.TrackingKeyed:
	default:
		return fmt.Errorf("%w: --router-tracking-hash %q: want %s or %s", errReference, r.trackingHash, routing.TrackingPublic, routing.TrackingKeyed)
	}
	if r.trackingKeyFile == "" {
		return fmt.Errorf("%w: --router-tracking-hash %s needs --router-tracking-key-file", errReference, routing.TrackingKeyed)
	}
	key, err := readKeyFile(r.trackingKeyFile)
	if err != nil {
		return fmt.Errorf("%w: --router-tracking-key-file %s: %w", errReference, r.trackingKeyFile, err)
	}
	if d.TrackingKey, err = routing.NewTrackingKey(key, r.trackingKeyID); err != nil {
		if r.trackingKeyID == "" {
			return fmt.Errorf("%w: --router-tracking-key-id: %w", errReference, err)
		}
		return fmt.Errorf("%w: --router-tracking-key-file %s: %w", errReference, r.trackingKeyFile, err)
	}
	return nil
}

// readKeyFile reads at most one byte more than a key, so that a huge file
// given by mistake is refused without being read whole.
func readKeyFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, routing.TrackingKeyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > routing.TrackingKeyBytes {
		return nil, fmt.Errorf("%w: key is over %d bytes, want exactly %d raw bytes", routing.ErrTrackingKey, routing.TrackingKeyBytes, routing.TrackingKeyBytes)
	}
	return b, nil
}

// resolveAccepted warns about accepted options that have no effect here.
func (f *nodeFlags) resolveAccepted() error {
	r := &f.ref
	for name, p := range r.noEffect {
		if *p {
			slog.Warn("option accepted for compatibility has no effect in kvrouter", "option", "--"+name)
		}
	}
	warn := func(cond bool, opt, why string) {
		if cond {
			slog.Warn("option accepted for compatibility: "+why, "option", opt)
		}
	}
	warn(r.approxPolicy == "lru", "--router-approximate-cache-policy", "lru runs as ttl")
	warn(r.stride != 1, "--router-active-sequence-stride", "every block is tracked (stride 1)")
	warn(r.minInitialWorkers > 0, "--router-min-initial-workers", "requests before the first engine registers get 503")
	switch {
	case r.approxPolicy != "ttl" && r.approxPolicy != "lru":
		return fmt.Errorf("%w: --router-approximate-cache-policy %q: want ttl or lru", errReference, r.approxPolicy)
	case r.prefillLoadModel != "none":
		return fmt.Errorf("%w: --router-prefill-load-model %q: only none is supported", errReference, r.prefillLoadModel)
	case r.minInitialWorkers < 0 || r.eventThreads < 1:
		return fmt.Errorf("%w: --router-min-initial-workers must be >= 0 and --router-event-threads >= 1", errReference)
	}
	return nil
}
