package fleet

import (
	"cmp"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// Engines returns a copy of every live engine, sorted by id.
func (r *Registry) Engines() []Engine {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Engine, 0, len(r.engines))
	for _, e := range r.engines {
		out = append(out, e.clone())
	}
	slices.SortFunc(out, func(a, b Engine) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Engine returns a copy of one engine.
func (r *Registry) Engine(id routing.WorkerID) (Engine, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.engines[id]
	if !ok {
		return Engine{}, false
	}
	return e.clone(), true
}

// Workers returns every live rank serving model, sorted by engine and rank;
// with worker-set admission (UseWorkerSets), only admitted engines' ranks.
func (r *Registry) Workers(model string) []routing.WorkerInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []routing.WorkerInfo
	for _, e := range r.engines {
		if e.Model == model && r.admittedLocked(e) {
			out = append(out, e.Workers...)
		}
	}
	slices.SortFunc(out, func(a, b routing.WorkerInfo) int {
		return cmp.Or(cmp.Compare(a.Worker.ID, b.Worker.ID), cmp.Compare(a.Worker.Rank, b.Worker.Rank))
	})
	return out
}

// Endpoint returns the engine's HTTP base URL.
func (r *Registry) Endpoint(id routing.WorkerID) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e, ok := r.engines[id]; ok {
		return e.Endpoint, true
	}
	return "", false
}

// BootstrapPort returns a prefill engine's KV bootstrap port (0 when it
// declared none) and whether the engine is registered.
func (r *Registry) BootstrapPort(id routing.WorkerID) (uint32, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e, ok := r.engines[id]; ok {
		return e.BootstrapPort, true
	}
	return 0, false
}

// Models returns the served model names, sorted and without duplicates.
func (r *Registry) Models() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.engines))
	for _, e := range r.engines {
		out = append(out, e.Model)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Load returns the engine-reported load of w from its last heartbeat.
func (r *Registry) Load(w routing.Worker) (routing.Load, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.engines[w.ID]
	if !ok || int(w.Rank) >= len(e.Loads) {
		return routing.Load{}, false
	}
	return e.Loads[w.Rank], true
}

// live reports whether id is registered with the given incarnation and
// how many ranks it has; the applier checks it for every batch.
func (r *Registry) live(id routing.WorkerID, incarnation uint64) (uint32, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.engines[id]
	if !ok || e.Incarnation != incarnation {
		return 0, false
	}
	return uint32(len(e.Workers)), true
}
