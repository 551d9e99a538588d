package fleet

// RouterConfigVersion changes whenever the incumbent of some worker set
// may have changed, and with it the router settings RouterConfig returns:
// a reader caches what it built from them until the version moves.
func (s *WorkerSets) RouterConfigVersion() uint64 {
	// Both counters only grow, so their sum moves when either does.
	return s.version.Load() + s.followedGeneration()
}

// RouterConfig returns the router settings the incumbent cohort of a
// model's worker set advertised (WorkerSets.RouterConfig); false without
// worker-set admission or settings.
func (r *Registry) RouterConfig(model string) (map[string]string, bool) {
	if s := r.workerSets(); s != nil {
		return s.RouterConfig(model)
	}
	return nil, false
}

// RouterConfigVersion is the worker sets' RouterConfigVersion, 0 without
// worker-set admission.
func (r *Registry) RouterConfigVersion() uint64 {
	if s := r.workerSets(); s != nil {
		return s.RouterConfigVersion()
	}
	return 0
}

// WorkerSets is the registry's worker-set admission, nil without it.
func (r *Registry) WorkerSets() *WorkerSets { return r.workerSets() }

// workerSets is the registry's worker sets, nil without admission.
func (r *Registry) workerSets() *WorkerSets {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sets
}
