package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"

	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// referenceFlags are the options that take the reference router's names:
// its flags (with their --no- forms and deprecated aliases), presets,
// tracking toggles and keyed tracking hashes, so that its command lines
// work unchanged. Options kvrouter had under another name are aliases of
// that option (registerCompat). Options whose mechanism kvrouter lacks are
// accepted (registerNoEffect), and a WARN at startup names each one set.
type referenceFlags struct {
	loadAware, agentic bool
	overlapWeight      float64 // deprecated; negative: unset
	trackActiveBlocks  bool
	assumeKVReuse      bool
	trackPrefill       bool
	trackOutput        bool
	outputDecay        float64
	trackingHash       string
	trackingKeyFile    string
	trackingKeyID      string
	sharedCacheType    string
	sharedCacheMult    float64
	approxPolicy       string
	prefillLoadModel   string
	stride             int
	eventThreads       int
}

// registerCompat registers the other names of the node's options: the
// reference router's names of options kvrouter names otherwise, and the
// deprecated ones.
func (f *nodeFlags) registerCompat(fs *pflag.FlagSet) {
	r, d := &f.ref, &f.cfg.Dispatch
	for _, a := range [][2]string{
		{"router-kv-overlap-score-credit", "kv-overlap-score-credit"},
		{"router-kv-overlap-score-credit-decay", "kv-overlap-score-credit-decay"},
		{"router-prefill-load-scale", "prefill-load-scale"},
		{"router-host-cache-hit-weight", "host-cache-hit-weight"},
		{"router-disk-cache-hit-weight", "disk-cache-hit-weight"},
		{"router-decode-active-request-weight", "decode-active-request-weight"},
		{"router-session-affinity-mode", "session-affinity-mode"},
		{"router-kv-events", "kv-events"},
	} {
		addAlias(fs, a[0], a[1], "reference name of --"+a[1])
	}
	addNegation(fs, &f.kvEvents, "no-router-kv-events", "kv-events")
	addSeconds(fs, &d.ApproxTTL, "router-ttl-secs", "router-ttl", "--router-ttl in seconds")
	addSeconds(fs, &d.PredictTTL, "router-predicted-ttl-secs", "router-predicted-ttl", "--router-predicted-ttl in seconds")
	addSeconds(fs, &d.AffinityTTL, "router-session-affinity-ttl-secs", "session-affinity-ttl", "--session-affinity-ttl in seconds")
	fs.Float64Var(&r.overlapWeight, "router-kv-overlap-score-weight", -1, "deprecated form of --prefill-load-scale\n"+
		"A value sets the prefill load scale, and 0 also the overlap credit; negative leaves it unset. It takes precedence over the options that replaced it, as in the reference.")
	addAlias(fs, "kv-overlap-score-weight", "router-kv-overlap-score-weight", "deprecated name of --router-kv-overlap-score-weight")
}

// registerNoEffect registers the reference router's options that kvrouter
// accepts without acting on them; their help says what happens here
// instead, and warnNoEffect logs it for each one set. Giving one an
// effect is moving its line to the register function of its purpose,
// bound to the option it sets.
func (f *nodeFlags) registerNoEffect(fs *pflag.FlagSet) {
	r := &f.ref
	addBool(fs, new(bool), "router-conditional-disagg", false, "disaggregated requests always take both hops")
	addBool(fs, new(bool), "router-prefill-continue", false, "a prefill engine never finishes a response")
	addBool(fs, new(bool), "router-replica-sync", false, "raft replicates bindings; load is per node")
	addBool(fs, new(bool), "serve-indexer", false, "every node keeps its own index, fed by raft")
	addBool(fs, new(bool), "use-remote-indexer", false, "every node keeps its own index, fed by raft")
	fs.IntVar(&r.eventThreads, "router-event-threads", 4, "the index is concurrent without a thread setting")
	addBool(fs, new(bool), "router-durable-kv-events", false, "deprecated by the reference: JetStream-durable KV events")
	addBool(fs, new(bool), "router-reset-states", false, "deprecated by the reference: purge of JetStream router state")
}

// errReference is the class of invalid reference options; messages name
// the flag.
var errReference = errors.New("invalid option")

// resolveReference folds the reference options into the configuration:
// deprecated aliases, presets, tracking toggles and the tracking key.
// Errors name the flag.
func (f *nodeFlags) resolveReference(log *slog.Logger) error {
	r, d := &f.ref, &f.cfg.Dispatch
	f.resolveDeprecated(log)
	for _, step := range []func() error{f.resolvePresets, f.resolveApprox, f.resolveTracking, f.resolveTrackingKey, f.resolveAccepted} {
		if err := step(); err != nil {
			return err
		}
	}
	d.KV.TrackPrefillTokens = r.trackPrefill
	return nil
}

// resolveDeprecated applies --router-kv-overlap-score-weight, which takes
// precedence over the options that replaced it, as in the reference.
func (f *nodeFlags) resolveDeprecated(log *slog.Logger) {
	r, d := &f.ref, &f.cfg.Dispatch
	if r.overlapWeight < 0 {
		return
	}
	log.Warn("deprecated option: use --prefill-load-scale and --kv-overlap-score-credit", "option", "--router-kv-overlap-score-weight")
	d.KV.PrefillLoadScale = r.overlapWeight
	if r.overlapWeight == 0 {
		d.KV.OverlapScoreCredit = 0
	}
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

// resolveApprox applies --router-approximate-cache-policy, after the
// presets (--load-aware turns approximate mode on).
func (f *nodeFlags) resolveApprox() error {
	r, d := &f.ref, &f.cfg.Dispatch
	p, err := index.ParsePolicy(r.approxPolicy)
	switch {
	case err != nil:
		return fmt.Errorf("%w: --router-approximate-cache-policy %q: want ttl or lru", errReference, r.approxPolicy)
	case p == index.PolicyLRU && !d.ApproximateMode:
		return fmt.Errorf("%w: --router-approximate-cache-policy lru models the caches of approximate mode: it needs --kv-events=false", errReference)
	}
	d.ApproxPolicy = p
	return nil
}

// resolveTracking applies the load tracker's toggles and the shared cache.
func (f *nodeFlags) resolveTracking() error {
	r, d := &f.ref, &f.cfg.Dispatch
	if !r.trackActiveBlocks {
		return fmt.Errorf("%w: --no-router-track-active-blocks: kvrouter always tracks active blocks (its cost model and busy thresholds need them)", errReference)
	}
	if !(r.outputDecay >= 0) || math.IsInf(r.outputDecay, 1) {
		return fmt.Errorf("%w: --output-block-decay %v: must be >= 0 and finite", errReference, r.outputDecay)
	}
	d.Tracking = policy.Tracking{NoKVReuse: !r.assumeKVReuse, NoPrefillTokens: !r.trackPrefill,
		OutputBlocks: r.trackOutput, OutputDecay: &r.outputDecay}
	if err := f.resolveSharedCache(); err != nil {
		return err
	}
	if r.stride != 1 {
		return fmt.Errorf("%w: --router-active-sequence-stride %d: kvrouter tracks every prompt block; only 1 is accepted", errReference, r.stride)
	}
	return nil
}

// resolveSharedCache applies --shared-cache-type and
// --shared-cache-multiplier: the credit of the blocks engines report on
// the shared tier, off with type none (and under --load-aware, whose
// preset has already zeroed it).
func (f *nodeFlags) resolveSharedCache() error {
	r, d := &f.ref, &f.cfg.Dispatch
	if !(r.sharedCacheMult >= 0) || math.IsInf(r.sharedCacheMult, 1) {
		return fmt.Errorf("%w: --shared-cache-multiplier %v: must be >= 0 and finite", errReference, r.sharedCacheMult)
	}
	switch {
	case r.sharedCacheType == sharedCacheNone || r.loadAware:
		d.KV.SharedCacheMultiplier = 0
	case r.sharedCacheType == sharedCacheEvents || r.sharedCacheType == sharedCacheHiCache:
		d.KV.SharedCacheMultiplier = r.sharedCacheMult
	default:
		return fmt.Errorf("%w: --shared-cache-type %q: want %s, %s or %s", errReference, r.sharedCacheType,
			sharedCacheEvents, sharedCacheHiCache, sharedCacheNone)
	}
	return nil
}

// The values of --shared-cache-type. The reference queries SGLang
// HiCache's L3 store for it; kvrouter learns the shared store's blocks
// from the engines' KV events (routing.TierShared), so hicache names the
// same source as events.
const (
	sharedCacheEvents  = "events"
	sharedCacheHiCache = "hicache"
	sharedCacheNone    = "none"
)

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

// resolveAccepted refuses the values of accepted options that kvrouter
// cannot honour even approximately.
func (f *nodeFlags) resolveAccepted() error {
	r := &f.ref
	switch {
	case r.prefillLoadModel != "none":
		return fmt.Errorf("%w: --router-prefill-load-model %q: only none is supported", errReference, r.prefillLoadModel)
	case f.cfg.MinInitialEngines < 0:
		return fmt.Errorf("%w: --router-min-initial-workers %d: must be >= 0", errReference, f.cfg.MinInitialEngines)
	case r.eventThreads < 1:
		return fmt.Errorf("%w: --router-event-threads %d: must be >= 1", errReference, r.eventThreads)
	}
	return nil
}
