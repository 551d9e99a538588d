package fleet

// IncumbentSource is a worker-set reservation decided elsewhere: in a
// cluster, the incumbents the leader wrote to the replicated log. Its
// methods are called under the worker sets' lock and must not block.
type IncumbentSource interface {
	// Incumbent returns the set's decided incumbent checksum.
	Incumbent(k SetKey) (checksum string, ok bool)
	// Generation changes whenever any set's decision changes.
	Generation() uint64
}

// Follow makes the worker sets route each set to the cohort src names,
// instead of to the first cohort this process saw: every node of a
// cluster then sends a set's traffic to the same cohort, whatever order
// its registry learnt the cards in. A set src has no decision for, or
// whose decided cohort this process has no engine of, keeps the local
// order (first sighting, then succession by age) until src decides.
// Call it before the first registration.
func (s *WorkerSets) Follow(src IncumbentSource) {
	s.mu.Lock()
	s.src = src
	s.mu.Unlock()
	s.version.Add(1)
}

// incumbentLocked is the index of a set's incumbent cohort in cs: the
// followed decision when it names a present cohort, else 0 (the oldest).
// Callers hold mu.
func (s *WorkerSets) incumbentLocked(k SetKey, cs []*cohort) int {
	if s.src == nil {
		return 0
	}
	sum, ok := s.src.Incumbent(k)
	if !ok {
		return 0
	}
	for i, c := range cs {
		if c.checksum == sum {
			return i
		}
	}
	return 0
}

// followedGeneration is the followed source's generation, 0 without one.
func (s *WorkerSets) followedGeneration() uint64 {
	s.mu.Lock()
	src := s.src
	s.mu.Unlock()
	if src == nil {
		return 0
	}
	return src.Generation()
}
