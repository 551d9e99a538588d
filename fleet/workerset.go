package fleet

import (
	"cmp"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Defaults of a card's worker-set fields left empty.
const (
	DefaultNamespace  = "default"
	DefaultComponent  = "backend"
	DefaultEndpoint   = "generate"
	DefaultWorkerType = "aggregated"
)

// SetKey names a worker set: the engines that serve one model on one
// endpoint in one role. Engines of a set must be interchangeable, so they
// must carry the same card checksum.
type SetKey struct {
	Namespace, Component, Endpoint, Model, WorkerType string
}

// KeyOf is the worker set of a card, with defaults for empty fields.
func KeyOf(c *kvrpb.WorkerCard) SetKey {
	or := func(v, d string) string { return cmp.Or(v, d) }
	return SetKey{
		Namespace: or(c.GetNamespace(), DefaultNamespace), Component: or(c.GetComponent(), DefaultComponent),
		Endpoint: or(c.GetEndpointName(), DefaultEndpoint), Model: c.GetModel(),
		WorkerType: or(c.GetWorkerType(), DefaultWorkerType),
	}
}

// ModelChecksum is the checksum that engines of one worker set must
// share: the card's model_checksum, or when the engine sent none, a hash
// of the fields that make engines interchangeable (model, block size and
// advertised router settings). The card's own checksum cannot serve: it
// covers per-engine fields such as the endpoint URL.
func ModelChecksum(c *kvrpb.WorkerCard) string {
	if c.GetModelChecksum() != "" {
		return c.GetModelChecksum()
	}
	h := xxh3.New()
	field := func(v string) {
		_, _ = h.WriteString(strconv.Itoa(len(v)))
		_, _ = h.WriteString(":" + v)
	}
	field(c.GetModel())
	field(strconv.FormatUint(uint64(c.GetBlockSize()), 10))
	for _, k := range slices.Sorted(maps.Keys(c.GetRouterConfig())) {
		field(k)
		field(c.GetRouterConfig()[k])
	}
	sum := h.Sum128().Bytes()
	return "derived:" + hex.EncodeToString(sum[:8])
}

// Cohort is the engines of a worker set that share one card checksum.
type Cohort struct {
	Checksum string
	Engines  []routing.WorkerID
	// RouterConfig is what the cohort's first card advertised; only the
	// incumbent's is ever used.
	RouterConfig map[string]string
}

// SetStatus is one worker set: its incumbent cohort (the one that gets
// traffic) and its rejected cohorts, oldest first.
type SetStatus struct {
	Key       SetKey
	Incumbent Cohort
	Rejected  []Cohort
}

// WorkerSets admits engines to worker sets by model card checksum
// (ModelChecksum). The first
// valid card of a set reserves it: engines with the same checksum join the
// incumbent cohort and get traffic; engines with another checksum form
// rejected cohorts, one per checksum, that get no traffic and cannot
// change the incumbent's configuration, however many they are. When the
// last incumbent engine leaves, the oldest remaining cohort succeeds it; a
// cohort that empties and comes back joins the end of the line. Seeing
// the same card again (duplicate discovery) changes nothing.
//
// It is safe for concurrent use. The registry calls it under its own lock
// (lock order: registry, then worker sets).
type WorkerSets struct {
	log *slog.Logger

	mu      sync.Mutex
	sets    map[SetKey][]*cohort // [0] is the incumbent
	members map[routing.WorkerID]membership
	// version changes whenever a cohort is created or dropped, which is
	// when an incumbent (and so its router settings) can change.
	version atomic.Uint64
	// src, when set, decides each set's incumbent (workerset_follow.go).
	src IncumbentSource
}

type cohort struct {
	checksum string
	engines  map[routing.WorkerID]struct{}
	config   map[string]string
}

type membership struct {
	key         SetKey
	checksum    string
	incarnation uint64
}

// NewWorkerSets returns empty worker sets; log receives the ERROR of each
// new rejected cohort and the WARN of each succession. log may be nil.
func NewWorkerSets(log *slog.Logger) *WorkerSets {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &WorkerSets{log: log, sets: map[SetKey][]*cohort{}, members: map[routing.WorkerID]membership{}}
}

// Observe admits a validated card's engine to its set's cohort and reports
// whether it is in the incumbent cohort. An engine whose card moved to
// another set or checksum leaves its old cohort first.
func (s *WorkerSets) Observe(c *kvrpb.WorkerCard) bool {
	id := routing.WorkerID(c.GetEngineId())
	m := membership{key: KeyOf(c), checksum: ModelChecksum(c), incarnation: c.GetIncarnation()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.members[id]; ok {
		if old.key == m.key && old.checksum == m.checksum {
			s.members[id] = m // a new incarnation of the same card keeps its place
			return s.admittedLocked(id)
		}
		s.leaveLocked(id)
	}
	cs := s.sets[m.key]
	i := slices.IndexFunc(cs, func(c *cohort) bool { return c.checksum == m.checksum })
	if i < 0 {
		cs = append(cs, &cohort{checksum: m.checksum, engines: map[routing.WorkerID]struct{}{}, config: maps.Clone(c.GetRouterConfig())})
		s.sets[m.key] = cs
		i = len(cs) - 1
		s.version.Add(1)
		s.logNewCohort(m, cs, id)
	}
	cs[i].engines[id] = struct{}{}
	s.members[id] = m
	return i == s.incumbentLocked(m.key, cs)
}

// logNewCohort reports a new cohort: a reservation, or a rejection.
func (s *WorkerSets) logNewCohort(m membership, cs []*cohort, id routing.WorkerID) {
	inc := s.incumbentLocked(m.key, cs)
	if len(cs) == 1 || inc == len(cs)-1 {
		s.log.Info("worker set reserved", setAttrs(m.key, "checksum", m.checksum, "worker", id)...)
		return
	}
	s.log.Error("worker set: engines with another card checksum are rejected and get no traffic",
		setAttrs(m.key, "checksum", m.checksum, "incumbent_checksum", cs[inc].checksum, "worker", id)...)
}

// Leave removes an engine of the given incarnation (a late removal of an
// earlier incarnation changes nothing); the registry calls it for every
// engine that leaves.
func (s *WorkerSets) Leave(id routing.WorkerID, incarnation uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.members[id]; ok && m.incarnation == incarnation {
		s.leaveLocked(id)
	}
}

// leaveLocked removes a member, drops its cohort when empty and hands the
// set to the oldest remaining cohort when the incumbent emptied.
func (s *WorkerSets) leaveLocked(id routing.WorkerID) {
	m := s.members[id]
	delete(s.members, id)
	cs := s.sets[m.key]
	i := slices.IndexFunc(cs, func(c *cohort) bool { return c.checksum == m.checksum })
	if i < 0 {
		return
	}
	delete(cs[i].engines, id)
	if len(cs[i].engines) > 0 {
		return
	}
	cs = slices.Delete(cs, i, i+1)
	s.version.Add(1)
	switch {
	case len(cs) == 0:
		delete(s.sets, m.key)
		s.log.Info("worker set released", setAttrs(m.key, "checksum", m.checksum)...)
		return
	case i == 0:
		s.log.Warn("worker set succession: the last incumbent engine left; the oldest rejected cohort now gets the traffic",
			setAttrs(m.key, "checksum", cs[0].checksum, "previous_checksum", m.checksum)...)
	}
	s.sets[m.key] = cs
}

// Admitted reports whether an engine may get traffic: it is in its set's
// incumbent cohort, or admission never saw it.
func (s *WorkerSets) Admitted(id routing.WorkerID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admittedLocked(id)
}

func (s *WorkerSets) admittedLocked(id routing.WorkerID) bool {
	m, ok := s.members[id]
	if !ok {
		return true
	}
	cs := s.sets[m.key]
	return len(cs) > 0 && cs[s.incumbentLocked(m.key, cs)].checksum == m.checksum
}

// RouterConfig returns the router settings the incumbent cohort of a
// model's sets advertised (the first card's), and whether any set of the
// model advertised settings. When several sets serve the model, the one
// with the smallest key decides.
func (s *WorkerSets) RouterConfig(model string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *SetKey
	var cfg map[string]string
	for k, cs := range s.sets {
		inc := cs[s.incumbentLocked(k, cs)]
		if k.Model != model || len(inc.config) == 0 {
			continue
		}
		if best == nil || compareKeys(k, *best) < 0 {
			k := k
			best, cfg = &k, inc.config
		}
	}
	return maps.Clone(cfg), best != nil
}

// Status returns every set, sorted by key, with its cohorts.
func (s *WorkerSets) Status() []SetStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SetStatus, 0, len(s.sets))
	for k, cs := range s.sets {
		inc := s.incumbentLocked(k, cs)
		st := SetStatus{Key: k, Incumbent: cs[inc].export()}
		for i, c := range cs {
			if i != inc {
				st.Rejected = append(st.Rejected, c.export())
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b SetStatus) int { return compareKeys(a.Key, b.Key) })
	return out
}

func (c *cohort) export() Cohort {
	ids := slices.Sorted(maps.Keys(c.engines))
	return Cohort{Checksum: c.checksum, Engines: ids, RouterConfig: maps.Clone(c.config)}
}

func compareKeys(a, b SetKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Component, b.Component),
		cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.Model, b.Model), cmp.Compare(a.WorkerType, b.WorkerType))
}

// setAttrs are a set's log attributes followed by more.
func setAttrs(k SetKey, more ...any) []any {
	return append([]any{"namespace", k.Namespace, "component", k.Component, "endpoint", k.Endpoint,
		"model", k.Model, "worker_type", k.WorkerType}, more...)
}

// UseWorkerSets makes the registry admit engines through s: Workers lists
// only admitted engines, and engines that leave the registry leave s.
// Call it before the first registration.
func (r *Registry) UseWorkerSets(s *WorkerSets) {
	r.mu.Lock()
	r.sets = s
	r.mu.Unlock()
	r.OnRemove(func(e Engine) { s.Leave(e.ID, e.Incarnation) })
}

// admittedLocked reports whether e may get traffic; callers hold r.mu.
func (r *Registry) admittedLocked(e *Engine) bool {
	return r.sets == nil || r.sets.Admitted(e.ID)
}

// observeLocked admits a registered card to its worker set; callers hold
// r.mu.
func (r *Registry) observeLocked(c *kvrpb.WorkerCard) {
	if r.sets != nil {
		r.sets.Observe(c)
	}
}
