package dispatch

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kvrouter/kvrouter/routing/policy"
)

// Advertiser is optionally implemented by an Engines with worker-set
// admission: the router settings the incumbent cohort of a model's worker
// set advertised in its cards. They replace the dispatcher's configured
// selector and busy thresholds for that model, without merging: a
// setting the engines leave out takes its default, not the value this
// router was started with (the reference router's rule, so that a set
// behaves the same behind every router). Runtime thresholds set through
// the operator API still win over both, and the admission queue stays
// this router's.
type Advertiser interface {
	// RouterConfig returns the model's advertised settings (option names
	// with underscores, values as on a command line) and whether there
	// are any.
	RouterConfig(model string) (map[string]string, bool)
	// RouterConfigVersion changes whenever RouterConfig's answer may have:
	// the dispatcher rebuilds its selectors only then.
	RouterConfigVersion() uint64
}

// advertisedSettings is what a model's advertised settings decide.
type advertisedSettings struct {
	sel policy.Selector
	th  *policy.Thresholds
}

// advertised caches the advertised settings built per model, until the
// source's version moves. Safe for concurrent use.
type advertised struct {
	src  Advertiser
	seed uint64
	log  *slog.Logger

	mu      sync.RWMutex
	version uint64
	by      map[string]*advertisedSettings // nil value: none, or invalid
}

// newAdvertised returns the cache over engines, nil when engines
// advertise nothing.
func newAdvertised(engines Engines, seed uint64, log *slog.Logger) *advertised {
	src, ok := engines.(Advertiser)
	if !ok {
		return nil
	}
	return &advertised{src: src, seed: seed, log: log, by: map[string]*advertisedSettings{}}
}

// apply makes q use the model's advertised selector and thresholds, if
// the model has any; thresholds set at run time keep precedence.
func (a *advertised) apply(q *policy.Query) {
	s := a.get(q.Model)
	if s == nil {
		return
	}
	q.Selector = s.sel
	if q.Thresholds == nil {
		q.Thresholds = s.th
	}
}

// get returns the model's advertised settings, nil when it has none.
func (a *advertised) get(model string) *advertisedSettings {
	if a == nil {
		return nil
	}
	v := a.src.RouterConfigVersion()
	a.mu.RLock()
	s, ok := a.by[model]
	fresh := a.version == v
	a.mu.RUnlock()
	if ok && fresh {
		return s
	}
	cfg, _ := a.src.RouterConfig(model)
	s = a.build(model, cfg)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.version != v {
		clear(a.by)
		a.version = v
	}
	a.by[model] = s
	return s
}

// build makes the settings of one advertised map; an invalid map is
// logged and ignored, so the model keeps this router's configuration.
func (a *advertised) build(model string, cfg map[string]string) *advertisedSettings {
	if len(cfg) == 0 {
		return nil
	}
	s, ignored, err := parseAdvertised(cfg, rand.New(rand.NewPCG(a.seed, uint64(len(model))+7)))
	if err != nil {
		a.log.Error("worker set's advertised router settings are invalid; the model keeps this router's", "model", model, "err", err)
		return nil
	}
	if len(ignored) > 0 {
		a.log.Warn("worker set advertises router settings that are not applied per set", "model", model, "keys", ignored)
	}
	a.log.Info("worker set's advertised router settings replace this router's for the model", "model", model,
		"policy", s.sel.Name())
	return s
}

// advertisedKey applies one advertised setting to the selector's name,
// options and thresholds being built.
type advertisedKey func(b *advertisedBuild, v string) error

type advertisedBuild struct {
	policy string
	opts   policy.Options
	th     policy.Thresholds
}

// advertisedKeys are the settings a worker set can advertise, under the
// option names of kvrouter node (with underscores) and the reference's
// library names where they differ.
var advertisedKeys = map[string]advertisedKey{
	"router_mode":                          func(b *advertisedBuild, v string) error { b.policy = v; return nil },
	"router_temperature":                   parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.Temperature }),
	"router_kv_overlap_score_credit":       parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.OverlapScoreCredit }),
	"kv_overlap_score_credit":              parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.OverlapScoreCredit }),
	"overlap_score_credit":                 parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.OverlapScoreCredit }),
	"router_kv_overlap_score_credit_decay": parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.OverlapScoreCreditDecay }),
	"router_prefill_load_scale":            parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.PrefillLoadScale }),
	"prefill_load_scale":                   parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.PrefillLoadScale }),
	"router_host_cache_hit_weight":         parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.HostCacheHitWeight }),
	"router_disk_cache_hit_weight":         parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.DiskCacheHitWeight }),
	"router_decode_active_request_weight":  parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.DecodeActiveRequestWeight }),
	"shared_cache_multiplier":              parsedKey(parseFloat, func(b *advertisedBuild) *float64 { return &b.opts.KV.SharedCacheMultiplier }),
	"router_track_prefill_tokens":          parsedKey(strconv.ParseBool, func(b *advertisedBuild) *bool { return &b.opts.KV.TrackPrefillTokens }),
	"active_decode_blocks_threshold":       parsedKey(parsePtr(parseFloat), func(b *advertisedBuild) **float64 { return &b.th.ActiveDecodeBlocks }),
	"active_prefill_tokens_threshold":      parsedKey(parsePtr(parseInt), func(b *advertisedBuild) **int64 { return &b.th.ActivePrefillTokens }),
	"active_prefill_tokens_threshold_frac": parsedKey(parsePtr(parseFloat), func(b *advertisedBuild) **float64 { return &b.th.ActivePrefillTokensFrac }),
}

// parsedKey is the setting that stores its value, parsed by parse, in
// the field that field returns.
func parsedKey[T any](parse func(string) (T, error), field func(*advertisedBuild) *T) advertisedKey {
	return func(b *advertisedBuild, v string) error {
		x, err := parse(v)
		*field(b) = x
		return err
	}
}

// parsePtr parses as parse does, into a new value: a threshold is set
// by pointing to it.
func parsePtr[T any](parse func(string) (T, error)) func(string) (*T, error) {
	return func(v string) (*T, error) {
		x, err := parse(v)
		return &x, err
	}
}

func parseFloat(v string) (float64, error) { return strconv.ParseFloat(v, 64) }

func parseInt(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }

// parseAdvertised builds the settings of an advertised map from the
// defaults, returning the keys it does not apply per set (sorted). A
// value that does not parse or validate is an error naming its key.
func parseAdvertised(cfg map[string]string, r *rand.Rand) (*advertisedSettings, []string, error) {
	b := advertisedBuild{policy: policy.NameKV, opts: policy.DefaultOptions(r)}
	var ignored []string
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		set, ok := advertisedKeys[strings.ReplaceAll(k, "-", "_")]
		if !ok {
			ignored = append(ignored, k)
			continue
		}
		if err := set(&b, strings.TrimSpace(cfg[k])); err != nil {
			return nil, nil, fmt.Errorf("%s=%q: %w", k, cfg[k], err)
		}
	}
	sel, err := policy.New(b.policy, b.opts)
	if err != nil {
		return nil, nil, err
	}
	// Thresholds the set leaves out are unset, not this router's: an
	// empty set of thresholds is what replaces them.
	if err := b.th.Validate(); err != nil {
		return nil, nil, err
	}
	return &advertisedSettings{sel: sel, th: &b.th}, ignored, nil
}
