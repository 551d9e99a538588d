package policy

import (
	"sync/atomic"
)

// RoundRobin cycles through the candidates: the n-th call picks index
// n mod len(cands). When the candidate list changes between calls the cycle
// continues over the new list. It is safe for concurrent use.
type RoundRobin struct {
	next atomic.Uint64
}

var _ Selector = (*RoundRobin)(nil)

// Name implements Selector.
func (*RoundRobin) Name() string { return NameRoundRobin }

// Select implements Selector.
func (s *RoundRobin) Select(d *Decision, _ *Request, cands []Candidate) error {
	if err := d.start(cands); err != nil {
		return err
	}
	n := s.next.Add(1) - 1
	d.choose(cands, int(n%uint64(len(cands))), "round-robin")
	return nil
}
