package policy

import (
	"math/rand/v2"
)

// PowerOfTwo samples two distinct candidates uniformly and picks the one
// with fewer active requests (the first sampled on a tie). Two choices give
// most of the balance of a full scan while staying oblivious to stale loads
// on the others. It is safe for concurrent use.
type PowerOfTwo struct {
	rng lockedRand
}

var _ Selector = (*PowerOfTwo)(nil)

// NewPowerOfTwo returns a power-of-two selector that owns r, or an error
// wrapping ErrInvalidConfig for a nil r.
func NewPowerOfTwo(r *rand.Rand) (*PowerOfTwo, error) {
	if r == nil {
		return nil, configError("power-of-two selector needs a *rand.Rand")
	}
	return &PowerOfTwo{rng: lockedRand{r: r}}, nil
}

// Name implements Selector.
func (*PowerOfTwo) Name() string { return NamePowerOfTwo }

// Select implements Selector.
func (s *PowerOfTwo) Select(d *Decision, _ *Request, cands []Candidate) error {
	if err := d.start(cands); err != nil {
		return err
	}
	if len(cands) == 1 {
		d.choose(cands, 0, "power-of-two")
		return nil
	}
	i, j := s.pair(len(cands))
	if cands[j].Load.ActiveRequests < cands[i].Load.ActiveRequests {
		i = j
	}
	d.choose(cands, i, "power-of-two")
	return nil
}

// pair draws two distinct indices in [0, n), n >= 2.
func (s *PowerOfTwo) pair(n int) (int, int) {
	s.rng.mu.Lock()
	defer s.rng.mu.Unlock()
	i, j := s.rng.r.IntN(n), s.rng.r.IntN(n-1)
	if j >= i {
		j++
	}
	return i, j
}
