package policy

import (
	"maps"
	"math/rand/v2"
	"slices"
)

// The names selectors are registered under, as in router_mode.
const (
	NameKV          = "kv"
	NameTwoTier     = "two-tier"
	NameRoundRobin  = "round-robin"
	NameRandom      = "random"
	NamePowerOfTwo  = "power-of-two"
	NameLeastLoaded = "least-loaded"
	NameDeviceAware = "device-aware-weighted"
	NameDirect      = "direct"
	NameKVTTFT      = "kv-ttft"
)

// Options are the configurations New may need; each selector reads only its
// own.
type Options struct {
	KV          KVConfig
	KVTTFT      KVTTFTConfig
	TwoTier     TwoTierConfig
	DeviceAware DeviceAwareConfig
	// Rand is the generator of the kv, kv-ttft, random and power-of-two
	// selectors.
	// The selector takes ownership: give each selector its own.
	Rand *rand.Rand
}

// DefaultOptions returns every selector's defaults with generator r.
func DefaultOptions(r *rand.Rand) Options {
	return Options{
		KV:          DefaultKVConfig(),
		KVTTFT:      DefaultKVTTFTConfig(),
		TwoTier:     DefaultTwoTierConfig(),
		DeviceAware: DefaultDeviceAwareConfig(),
		Rand:        r,
	}
}

// constructors maps each name to its constructor.
var constructors = map[string]func(Options) (Selector, error){
	NameKV:          func(o Options) (Selector, error) { return NewKV(o.KV, o.Rand) },
	NameKVTTFT:      func(o Options) (Selector, error) { return NewKVTTFT(o.KVTTFT, o.Rand) },
	NameTwoTier:     func(o Options) (Selector, error) { return NewTwoTier(o.TwoTier) },
	NameRoundRobin:  func(Options) (Selector, error) { return &RoundRobin{}, nil },
	NameRandom:      func(o Options) (Selector, error) { return NewRandom(o.Rand) },
	NamePowerOfTwo:  func(o Options) (Selector, error) { return NewPowerOfTwo(o.Rand) },
	NameLeastLoaded: func(Options) (Selector, error) { return LeastLoaded{}, nil },
	NameDeviceAware: func(o Options) (Selector, error) { return NewDeviceAware(o.DeviceAware) },
	NameDirect:      func(Options) (Selector, error) { return Direct{}, nil },
}

// aliases are the reference router's short names of its modes, each
// mapped to the registered name it abbreviates, so that its command lines
// and manifests work unchanged. They are not listed by Names: help and
// documentation name each selector once.
var aliases = map[string]string{
	"rr":  NameRoundRobin,
	"p2c": NamePowerOfTwo,
}

// Canonical returns the registered name that name stands for: name itself,
// or the name an alias abbreviates; "" when name is neither.
func Canonical(name string) string {
	if _, ok := constructors[name]; ok {
		return name
	}
	return aliases[name]
}

// Aliases returns the short names, sorted, for help texts.
func Aliases() []string { return slices.Sorted(maps.Keys(aliases)) }

// New returns the selector registered under name (or an alias of it, see
// Canonical), configured from o. An unknown name is an
// *UnknownPolicyError; an invalid configuration wraps ErrInvalidConfig.
func New(name string, o Options) (Selector, error) {
	mk, ok := constructors[Canonical(name)]
	if !ok {
		return nil, &UnknownPolicyError{Name: name}
	}
	return mk(o)
}

// Names returns the registered selector names, sorted.
func Names() []string { return slices.Sorted(maps.Keys(constructors)) }
