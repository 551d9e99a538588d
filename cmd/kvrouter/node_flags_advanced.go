package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/load"
)

// registerAdvanced registers the options whose defaults suit nearly every
// deployment: the cost model's finer weights, the selectors' internals,
// the load tracker's toggles, limits and timers. --help leaves them out;
// --help-all and docs/configuration.md list them.
func (f *nodeFlags) registerAdvanced(fs *pflag.FlagSet) {
	d, r := &f.cfg.Dispatch, &f.ref
	fs.Float64Var(&d.KV.OverlapScoreCreditDecay, "kv-overlap-score-credit-decay", d.KV.OverlapScoreCreditDecay, "decay of the device credit with excess active prefill")
	fs.Float64Var(&d.KV.HostCacheHitWeight, "host-cache-hit-weight", d.KV.HostCacheHitWeight, "credit per cached host-tier block, in [0,1]")
	fs.Float64Var(&d.KV.DiskCacheHitWeight, "disk-cache-hit-weight", d.KV.DiskCacheHitWeight, "credit per cached disk-tier block, in [0,1]")
	fs.Float64Var(&r.sharedCacheMult, "shared-cache-multiplier", 0.5, "KV cost model: credit per shared-tier block\n"+
		"Per prompt block that an engine reported on a store the DC shares (medium EXTERNAL, SHARED, REMOTE "+
		"or NETWORK), counted for every candidate at positions beyond its own device prefix; 0.5 is the "+
		"reference's. Negative is refused.")
	fs.StringVar(&r.sharedCacheType, "shared-cache-type", sharedCacheEvents, "shared tier: events, hicache (same) or none\n"+
		"events credits the shared-tier blocks of the engines' KV events; hicache is the reference's name, "+
		"which here credits the same blocks (SGLang's L3 counts when published under a shared medium); "+
		"none turns the credit off.")
	fs.Float64Var(&d.DeviceAware.AcceleratorWeight, "encoder-cuda-to-cpu-ratio", d.DeviceAware.AcceleratorWeight, "device-aware-weighted: weight of a non-CPU worker\nIts capacity relative to a CPU worker.")
	fs.Float64Var(&d.TwoTier.CacheThreshold, "two-tier-cache-threshold", d.TwoTier.CacheThreshold, "two-tier: cache decides above this cached share\nIn [0,1].")
	fs.Int64Var(&d.TwoTier.BalanceAbsThreshold, "two-tier-balance-abs-threshold", d.TwoTier.BalanceAbsThreshold, "two-tier: load decides above this spread\nThe spread of active requests between workers.")
	fs.Float64Var(&d.TwoTier.BalanceRelThreshold, "two-tier-balance-rel-threshold", d.TwoTier.BalanceRelThreshold, "two-tier: and above this max/min ratio\nThe ratio of the most to the fewest active requests must also exceed it; >= 1.")
	fs.Float64Var(&d.TwoTier.HostCacheWeight, "two-tier-host-cache-weight", d.TwoTier.HostCacheWeight, "two-tier: weight of host-tier hits, [0,1]\nOf the host-memory run in the cache tier.")
	fs.StringVar(&r.approxPolicy, "router-approximate-cache-policy", "ttl", "approximate index: ttl or lru\n"+
		"ttl forgets a prompt --router-ttl after it was routed. lru models each engine rank's cache at its "+
		"advertised capacity: the blocks of requests in flight stay, the least recently released go first. "+
		"lru needs --kv-events=false.")
	addBool(fs, &r.trackActiveBlocks, "router-track-active-blocks", true, "track in-flight blocks (false is refused)\n"+
		"kvrouter's cost model and busy thresholds need them.")
	fs.IntVar(&r.stride, "router-active-sequence-stride", 1, "blocks per tracked hash: only 1\n"+
		"kvrouter keeps a hash for every prompt block; other strides are refused at startup.")
	fs.StringVar(&r.prefillLoadModel, "router-prefill-load-model", "none", "prefill load model: none (aic is refused)\n"+
		"Prompt-side load is the uncached prompt tokens until the first token; kvrouter has no AIConfigurator client.")
	fs.IntVar(&f.cfg.MinInitialEngines, "router-min-initial-workers", 0, "hold requests until this many engines (0: none)\n"+
		"The routed endpoints answer 503 not_ready, and /ready is false, until the fleet first counts this many "+
		"live engines; then they serve whatever the fleet becomes.")
	addBool(fs, &r.assumeKVReuse, "router-assume-kv-reuse", true, "count blocks shared by in-flight requests once\nPer worker: prompt blocks de-duplicated.")
	addBool(fs, &r.trackPrefill, "router-track-prefill-tokens", true, "count uncached prompt tokens as load\nUntil the first output token.")
	addBool(fs, &r.trackOutput, "router-track-output-blocks", false, "count the blocks a request's output fills as load\n"+
		"A block of load each time the streamed output crosses a block boundary (one token per chunk; an "+
		"answer that does not stream counts its usage at the end). With nvext.agent_hints.osl the expected "+
		"output's blocks count from routing and lose weight as the output nears that length.")
	fs.Float64Var(&r.outputDecay, "output-block-decay", load.DefaultOutputDecay, "output blocks' weight: 1 - this × output/osl\n"+
		"With --router-track-output-blocks and an osl hint. 1 is the reference's (weight 0 at the expected length); "+
		"0 keeps full weight until the request ends; negative is refused.")
	addSeconds(fs, &d.MaxRequestAge, "router-active-request-expiry-secs", "", "expire lost requests (0: never)\n"+
		"A request whose completion never arrived stops counting as load after this many seconds.")
	fs.StringVar(&r.trackingHash, "router-tracking-hash", routing.TrackingPublic, "identities of in-flight requests\n"+routing.TrackingPublic+" or "+routing.TrackingKeyed+" (with a key file).")
	fs.StringVar(&r.trackingKeyFile, "router-tracking-key-file", "", "file of exactly 32 raw key bytes for "+routing.TrackingKeyed)
	fs.StringVar(&r.trackingKeyID, "router-tracking-key-id", "", "non-empty id (epoch) of the tracking key")
	fs.Uint64Var(&d.Seed, "seed", 0, "seed of the selectors' random tie-breaks (reproducible)")
	registerEngineLimits(fs, &f.cfg)
	cc := &f.cfg.Cluster
	fs.DurationVar(&cc.HeartbeatTimeout, "raft-heartbeat-timeout", 0, "a follower elects after 1-3x this without a leader (0: 500ms)")
	fs.DurationVar(&cc.ElectionTimeout, "raft-election-timeout", 0, "a candidate retries after 1-2x this with no majority (0: 500ms)")
	fs.DurationVar(&f.cfg.Drain.TransferTimeout, "drain-transfer-timeout", node.DefaultTransferTimeout, "on SIGTERM, a raft leader's wait for a successor")
}

// registerEngineLimits registers the limits on engines and their
// registrations, and the compatibility switches of their protocol.
func registerEngineLimits(fs *pflag.FlagSet, c *node.Config) {
	fs.BoolVar(&c.Frontend.EngineCleartextHTTP2, "engine-h2c", false, "speak HTTP/2 without TLS to http:// engines (default HTTP/1.1)\n"+
		"https engines use HTTP/2 when they offer it.")
	e := &c.Events
	fs.DurationVar(&e.SnapshotTimeout, "snapshot-timeout", fleet.DefaultSnapshotTimeout, "resync: wait this long for an engine's snapshot")
	fs.IntVar(&e.MaxEngines, "max-engines", fleet.DefaultMaxEngines, "most engines registered; more cards are refused\n"+
		"Declared engines are always admitted.")
	fs.Float64Var(&e.RegistrationRate, "engine-registration-rate", fleet.DefaultRegistrationRate, "registry changes per second after the burst\n"+
		"Cards that add, restart or update an engine; refreshing cards are not limited.")
	fs.IntVar(&e.RegistrationBurst, "engine-registration-burst", fleet.DefaultRegistrationBurst, "engine cards that may change the registry at once")
	fs.BoolVar(&e.RefuseV1Subjects, "refuse-v1-engine-subjects", false, "stop listening on protocol v1's shared worker subjects\n"+
		"kvr.<dc>.workers.register, .heartbeat and .deregister; set once every engine publishes on its own "+
		"kvr.<dc>.workers.<id>.* subjects.")
}
