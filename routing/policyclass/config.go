package policyclass

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/queue"
)

// DefaultClass names the synthetic profile's single class.
const DefaultClass = "default"

// MaxFileBytes bounds the file: a policy configuration is a few KiB, and
// a bound keeps a wrong path (a model file) from being read whole.
const MaxFileBytes = 1 << 20

// Defaults are what the queue flags give every profile: the synthetic
// profile's order and threshold, and what classes that set none inherit.
type Defaults struct {
	// Order is --router-queue-policy.
	Order queue.Order
	// ThresholdFrac is --router-queue-threshold: a worker is busy while its
	// active prefill tokens exceed ThresholdFrac × max_num_batched_tokens.
	// nil: no queue threshold.
	ThresholdFrac *float64
	// MaxWait bounds a request's time in the queue when its class sets no
	// max_queue_wait_secs; 0 is no bound beyond the client's.
	MaxWait time.Duration
}

// Class is one physical class, resolved.
type Class struct {
	queue.ClassConfig
	// Thresholds are the class's busy thresholds (only the prefill ones).
	Thresholds policy.Thresholds
	// MaxWait bounds the time in the queue; 0 is no bound.
	MaxWait time.Duration
}

// Profile is one resolved profile.
type Profile struct {
	// Name is the model of an exact profile, "" for the root and
	// "synthetic" for the fallback.
	Name    string
	Order   queue.Order
	Classes []Class
	// Selection is the aggregated stage's selector; nil is the router's.
	Selection *Selection

	defaultFamily string
	families      map[string][]bucket
	explicit      map[string]int
}

// bucket maps uncached ISL from floor up to a class index.
type bucket struct {
	floor int64
	class int
}

// Config is a loaded policy configuration.
type Config struct {
	root     *Profile // nil when the root defines no classes
	profiles map[string]*Profile
	synth    *Profile
}

// Load reads and parses the file at path; an empty path gives the
// synthetic profile only.
func Load(path string, d Defaults) (*Config, error) {
	if path == "" {
		return Parse(nil, d)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s: over %d bytes", ErrConfig, path, MaxFileBytes)
	}
	c, err := Parse(data, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse parses a policy configuration; nil data gives the synthetic
// profile only.
func Parse(data []byte, d Defaults) (*Config, error) {
	synth, err := synthetic(d)
	if err != nil {
		return nil, err
	}
	c := &Config{synth: synth, profiles: map[string]*Profile{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	var doc fileDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Classes) > 0 || len(doc.Families) > 0 || doc.DefaultFamily != "" {
		if c.root, err = resolve("", "", doc.profileDoc, d); err != nil {
			return nil, err
		}
	}
	for _, model := range sortedKeys(doc.Profiles) {
		p, err := resolve(join("profiles", model), model, doc.Profiles[model], d)
		if err != nil {
			return nil, err
		}
		c.profiles[model] = p
	}
	return c, nil
}

// For returns the profile of model: its exact profile, else the root,
// else the synthetic one.
func (c *Config) For(model string) *Profile {
	if p := c.profiles[model]; p != nil {
		return p
	}
	if c.root != nil {
		return c.root
	}
	return c.synth
}

// synthetic is the single-class profile of the queue flags.
func synthetic(d Defaults) (*Profile, error) {
	if v := d.ThresholdFrac; v != nil && !(*v >= 0 && !math.IsInf(*v, 1)) {
		return nil, fmt.Errorf("%w: router_queue_threshold must be finite and >= 0, got %v", ErrConfig, *v)
	}
	cl := Class{ClassConfig: queue.ClassConfig{Name: DefaultClass, Quantum: queue.DefaultQuantum}, MaxWait: d.MaxWait}
	cl.Thresholds.ActivePrefillTokensFrac = d.ThresholdFrac
	return &Profile{Name: "synthetic", Order: d.Order, Classes: []Class{cl}, explicit: map[string]int{DefaultClass: 0}}, nil
}

// sortedKeys returns a map's keys in order, so that errors and class
// order do not depend on map iteration.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
