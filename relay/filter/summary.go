package filter

import (
	"fmt"
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/routing"
)

// Summary is what every filter kind offers: what a consumer needs to
// search prefixes and follow deltas, and what a producer needs to ship the
// filter. Implementations are not safe for concurrent mutation; their read
// methods are safe to call concurrently while nothing mutates them.
type Summary interface {
	// Kind names the implementation.
	Kind() Kind
	// Contains reports whether h is probably present; false is certain.
	Contains(h routing.SeqHash) bool
	// ContainsPrefix returns the length of the longest prefix of hs all of
	// whose blocks are probably present.
	ContainsPrefix(hs []routing.SeqHash) int
	// Len returns the number of entries the filter holds.
	Len() int
	// SizeBytes returns the size of the filter's bit storage.
	SizeBytes() int
	// FalsePositiveRate returns the expected false-positive rate at the
	// current occupancy, from the kind's formula.
	FalsePositiveRate() float64
	// MarshalBinary encodes the filter in the package's versioned,
	// checksummed format; Decode reverses it.
	MarshalBinary() ([]byte, error)
	// TrackChanges starts the change log that TakeChanges empties into a
	// Delta of the changes since the previous call.
	TrackChanges()
	TakeChanges() Delta
	// Apply installs a delta of the filter's kind and geometry whole, or
	// refuses it whole.
	Apply(d Delta) error
}

// mutableSummary is what a RefSet drives: the read side plus an insert and
// a remove that may refuse (ErrFull, or errNoDelete for Bloom).
type mutableSummary interface {
	Summary
	insert(h routing.SeqHash) error
	remove(h routing.SeqHash) error
}

// newSummary returns an empty summary of cfg.Kind (after EnsureDefaults),
// with its mutable side for a RefSet. rng is used by the cuckoo kinds
// only; see NewCuckoo.
func newSummary(cfg Config, rng *rand.Rand) (mutableSummary, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Kind == KindBloom {
		return newBloomSummary(cfg)
	}
	return newCuckoo(cfg.Kind, cfg.Seed, cfg.cuckooBuckets(), cfg.MaxKicks, rng), nil
}

// Decode parses a full summary of any kind produced by MarshalBinary.
// Malformed input yields an error wrapping ErrCorrupt; a version, kind or
// parameter set this build does not know yields ErrUnsupported.
func Decode(data []byte) (Summary, error) {
	h, body, err := decodeFrame(data)
	if err != nil {
		return nil, err
	}
	if h.flags != 0 {
		return nil, fmt.Errorf("%w: flags %#x on a full summary (deltas go to DecodeDelta)", ErrCorrupt, h.flags)
	}
	switch h.kind {
	case KindCuckoo, KindCuckooCompact:
		// A nil *Cuckoo must not become a non-nil Summary.
		c, err := decodeCuckoo(h, body)
		if err != nil {
			return nil, err
		}
		return c, nil
	case KindBloom:
		return decodeBloomSummary(h, body)
	default:
		return nil, fmt.Errorf("%w: kind %d", ErrUnsupported, h.kind)
	}
}
