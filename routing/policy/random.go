package policy

import (
	"math/rand/v2"
)

// Random picks a candidate uniformly at random. It is safe for concurrent
// use.
type Random struct {
	rng lockedRand
}

var _ Selector = (*Random)(nil)

// NewRandom returns a random selector that owns r, or an error wrapping
// ErrInvalidConfig for a nil r.
func NewRandom(r *rand.Rand) (*Random, error) {
	if r == nil {
		return nil, configError("random selector needs a *rand.Rand")
	}
	return &Random{rng: lockedRand{r: r}}, nil
}

// Name implements Selector.
func (*Random) Name() string { return NameRandom }

// Select implements Selector.
func (s *Random) Select(d *Decision, _ *Request, cands []Candidate) error {
	if err := d.start(cands); err != nil {
		return err
	}
	d.choose(cands, s.rng.intN(len(cands)), "random")
	return nil
}
