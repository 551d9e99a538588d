package policyclass

import (
	"fmt"
	"math"

	"github.com/kvrouter/kvrouter/routing/policy"
)

// The built-in worker-selection type names of the reference's catalogue;
// every name of policy.Names(), and its short name, is accepted too.
const (
	SelectionDefault = "default"
	SelectionTwoTier = "dynamo-two-tier-cost-fn"
)

// StageAggregated is the one stage kvrouter routes: engines that prefill
// and decode.
const StageAggregated = "aggregated"

// Selection is a stage's worker selection, resolved to a selector of the
// catalogue.
type Selection struct {
	// Policy is the selector's name (policy.New).
	Policy string
	// TwoTier holds the two-tier parameters, the defaults overlaid by the
	// file's params.
	TwoTier policy.TwoTierConfig
}

// Options returns base with the selection's parameters applied.
func (s *Selection) Options(base policy.Options) policy.Options {
	if s.Policy == policy.NameTwoTier {
		base.TwoTier = s.TwoTier
	}
	return base
}

// twoTierParams maps each two-tier parameter key to its field.
var twoTierParams = map[string]func(c *policy.TwoTierConfig, v float64){
	"cache_threshold":       func(c *policy.TwoTierConfig, v float64) { c.CacheThreshold = v },
	"balance_abs_threshold": func(c *policy.TwoTierConfig, v float64) { c.BalanceAbsThreshold = int64(v) },
	"balance_rel_threshold": func(c *policy.TwoTierConfig, v float64) { c.BalanceRelThreshold = v },
	"host_cache_weight":     func(c *policy.TwoTierConfig, v float64) { c.HostCacheWeight = v },
}

// resolveSelection validates worker_selection at path.
func resolveSelection(path string, stages map[string]selectionDoc) (*Selection, error) {
	for _, st := range sortedKeys(stages) {
		if st != StageAggregated {
			return nil, pathError(join(path, st), "unsupported stage: kvrouter routes aggregated engines only")
		}
	}
	doc, ok := stages[StageAggregated]
	if !ok {
		return nil, nil
	}
	path = join(path, StageAggregated)
	s := &Selection{TwoTier: policy.DefaultTwoTierConfig()}
	switch {
	case doc.Type == SelectionDefault:
		s.Policy = policy.NameKV
	case doc.Type == SelectionTwoTier || doc.Type == policy.NameTwoTier:
		s.Policy = policy.NameTwoTier
		if err := s.twoTier(path, doc.Params); err != nil {
			return nil, err
		}
		return s, nil
	case policy.Canonical(doc.Type) != "":
		s.Policy = policy.Canonical(doc.Type)
	default:
		return nil, pathError(join(path, "type"), "unknown policy %q (built in: %s, %s, %v)", doc.Type, SelectionDefault, SelectionTwoTier, policy.Names())
	}
	if len(doc.Params) > 0 {
		return nil, pathError(join(path, "params"), "policy %q takes no params", doc.Type)
	}
	return s, nil
}

// twoTier applies and validates the two-tier params.
func (s *Selection) twoTier(path string, params map[string]any) error {
	for _, k := range sortedKeys(params) {
		set, ok := twoTierParams[k]
		if !ok {
			return pathError(join(join(path, "params"), k), "unknown parameter of %s", SelectionTwoTier)
		}
		v, ok := number(params[k])
		if !ok {
			return pathError(join(join(path, "params"), k), "must be a number, got %v", params[k])
		}
		set(&s.TwoTier, v)
	}
	if err := s.TwoTier.Validate(); err != nil {
		return fmt.Errorf("%w: %s.params: %w", ErrConfig, path, err)
	}
	return nil
}

// number reads a YAML scalar as a finite float.
func number(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float64:
		f = x
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}
