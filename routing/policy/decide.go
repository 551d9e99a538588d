package policy

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
)

// Decider is a router's whole decision path, shared by the router node and
// the simulator: candidates (block size, suspects), matching (exact index,
// side index, approximate index), load projection (bookings plus engine
// reports), session affinity, the filter pipeline and selector, and
// booking. A request goes through Candidates, then (once the caller has
// hashed the prompt at Scratch.BlockSize into Scratch.Hashes) Match,
// Choose and Book; the Booking ends it.
//
// Concurrency: every method is safe for concurrent use; per-call state is
// in the caller's Scratch, which must not be shared.
type Decider struct {
	cfg    DeciderConfig
	exact  *index.Exact
	approx *index.Approx
	// text matches text prompts: approx itself under the TTL policy, a
	// TTL index of its own under LRU (decide_approx.go).
	text *index.Approx
	side *index.Approx
	pipe *Pipeline
	// authoritative: the session store binds first (see Authoritative).
	authoritative bool

	// mu guards trackers, which change rarely (a new block size).
	mu         sync.RWMutex
	trackers   map[int]*load.Tracker
	suspects   suspects
	lastExpire atomic.Int64
}

// NewDecider builds a Decider over the event-fed exact index, which may be
// nil only in approximate mode.
func NewDecider(cfg DeciderConfig, exact *index.Exact) (*Decider, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if exact == nil && !cfg.ApproximateMode {
		return nil, configError("exact index: required unless approximate_mode")
	}
	d := &Decider{cfg: cfg, exact: exact, trackers: make(map[int]*load.Tracker)}
	if a, ok := cfg.Bindings.(Authoritative); ok {
		d.authoritative = a.Authoritative()
	}
	if err := d.buildIndexes(); err != nil {
		return nil, err
	}
	return d, d.buildPipeline()
}

// buildPipeline makes the selector and the standard filter pipeline.
func (d *Decider) buildPipeline() error {
	opts := d.cfg.Options
	opts.Rand = rand.New(rand.NewPCG(d.cfg.Seed, randStream))
	sel, err := New(d.cfg.Policy, opts)
	if err != nil {
		return err
	}
	d.pipe, err = NewPipeline(d.cfg.Thresholds, sel)
	return err
}

// Approx returns the Decider's own approximate index, which approximate
// mode matches against (and text prompts too, under the TTL policy; under
// LRU they have a TTL index of their own, decide_approx.go).
func (d *Decider) Approx() *index.Approx { return d.approx }

// Query is one request as the decision path sees it.
type Query struct {
	// ID names the request's booking; unique while it is active.
	ID string
	// Model is the requested model, named in errors.
	Model string
	// Ranks are the live ranks serving the model, in any order; the
	// Decider only reads them.
	Ranks []routing.WorkerInfo
	// ISLTokens is the prompt length in tokens (estimated for text).
	ISLTokens int
	// Pin optionally names the exact engine (and rank) to use: under
	// Disagg, the decode rank. PrefillPin names Disagg's prefill rank;
	// a Decider ignores it.
	Pin, PrefillPin *Pin
	// Allowed, when not nil, restricts the choice to these engines (a
	// gateway's endpoint subset): the pipeline filters the others out, a
	// session bound outside the set moves on success as a soft miss does,
	// and a pin outside it is ErrNoCompatibleWorker, since the engine is
	// unavailable to this request rather than unknown. Empty allows none.
	Allowed []routing.WorkerID
	// SessionKey is the binding key (session id, or the parent's for a
	// session group); empty for none. SessionFinal ends it with the
	// request.
	SessionKey   string
	SessionFinal bool
	// Thresholds, when set, replace DeciderConfig.Thresholds for this
	// request (the model's runtime busy thresholds); Selector, when set,
	// replaces the Decider's selector (a policy profile's
	// worker_selection). See decide_queue.go.
	Thresholds *Thresholds
	Selector   Selector
	// OutputTokens is the expected output length, 0 when unknown; the
	// load tracker books the output's blocks with output-block tracking
	// on. Overrides adjust the KV cost model for this request.
	OutputTokens int
	Overrides    Overrides
}

// allows reports whether q's allowed set admits engine id.
func (q *Query) allows(id routing.WorkerID) bool {
	return q.Allowed == nil || slices.Contains(q.Allowed, id)
}

// Scratch is one decision's reusable memory; pool it so that the hot path
// allocates only what outlives the call.
type Scratch struct {
	// Hashes are the prompt's block hashes at BlockSize(), or its text
	// chunk hashes when Text is set; the caller fills them after
	// Candidates.
	Hashes []routing.SeqHash
	Text   bool
	// TrackHashes, when Keyed is set, are the prompt's keyed tracking
	// identities (routing.TrackingKey), which the load tracker books in
	// place of Hashes; the indexes still match Hashes.
	TrackHashes []routing.SeqHash
	Keyed       bool

	exact, side, matches, all []routing.Match
	shared                    []index.Range
	loads                     []routing.Load
	cands                     []Candidate
	dec                       Decision
	preq                      Request
	plan                      plan
}

// plan is what the Decider learned about a request before choosing.
type plan struct {
	now       time.Time
	tracker   *load.Tracker
	blockSize int
	isl       int
	osl       int
	// blocks is the prompt's complete blocks of blockSize tokens.
	blocks int
	// th are the request's busy thresholds.
	th *Thresholds
}

// BlockSize is the block size Candidates chose for the request.
func (sc *Scratch) BlockSize() int { return sc.plan.blockSize }

// Blocks is the prompt's complete blocks at BlockSize.
func (sc *Scratch) Blocks() int { return sc.plan.blocks }

// Candidates resets sc for q at now and keeps, sorted by worker, the ranks
// at the model's block size that are not suspected. It also runs the
// rate-limited expiry sweep. It fails with ErrNoCompatibleWorker when
// nothing is left, or when q is pinned to a suspect.
func (d *Decider) Candidates(sc *Scratch, q *Query, now time.Time) error {
	d.maybeExpire(now)
	sc.plan, sc.Text, sc.Keyed, sc.cands = plan{now: now, isl: q.ISLTokens, osl: q.OutputTokens, th: d.thresholds(q)}, false, false, sc.cands[:0]
	bs := d.cfg.BlockSize
	if bs == 0 && len(q.Ranks) > 0 {
		bs = q.Ranks[0].BlockSize
	}
	suspected := 0
	for _, in := range q.Ranks {
		switch {
		case in.BlockSize != bs:
		case d.suspects.has(in.Worker.ID, now):
			suspected++
		default:
			sc.cands = append(sc.cands, Candidate{Info: in})
		}
	}
	if err := d.noCandidates(sc, q, bs, suspected); err != nil {
		return err
	}
	slices.SortFunc(sc.cands, func(a, b Candidate) int { return a.Info.Worker.Compare(b.Info.Worker) })
	t, err := d.tracker(bs)
	if err != nil {
		return fmt.Errorf("%w: block size %d: %w", ErrNoCompatibleWorker, bs, err)
	}
	sc.plan.tracker, sc.plan.blockSize, sc.plan.blocks = t, bs, q.ISLTokens/bs
	return nil
}

// noCandidates explains an empty candidate list, or a pin to a suspect.
func (d *Decider) noCandidates(sc *Scratch, q *Query, bs, suspected int) error {
	if q.Pin != nil && suspected > 0 && d.suspects.has(q.Pin.Worker, sc.plan.now) {
		// The pin names a registered engine, so the client is not at
		// fault: the engine is unavailable, as one that left would be.
		return fmt.Errorf("%w: pinned engine %d was unreachable in the last %v", ErrNoCompatibleWorker, q.Pin.Worker, d.cfg.SuspectTimeout)
	}
	switch {
	case len(sc.cands) > 0:
		return nil
	case suspected > 0:
		return fmt.Errorf("%w: every rank serving %q was unreachable in the last %v", ErrNoCompatibleWorker, q.Model, d.cfg.SuspectTimeout)
	}
	return fmt.Errorf("%w: no live rank serves %q at block size %d", ErrNoCompatibleWorker, q.Model, bs)
}

// tracker returns the load tracker of a block size, creating it: engines
// of different block sizes cannot share one, since the tracker counts
// blocks.
func (d *Decider) tracker(blockSize int) (*load.Tracker, error) {
	d.mu.RLock()
	t := d.trackers[blockSize]
	d.mu.RUnlock()
	if t != nil {
		return t, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if t = d.trackers[blockSize]; t != nil {
		return t, nil
	}
	t, err := load.New(d.cfg.trackerConfig(blockSize))
	if err != nil {
		return nil, err
	}
	d.trackers[blockSize] = t
	return t, nil
}

// allTrackers snapshots the trackers.
func (d *Decider) allTrackers() []*load.Tracker {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return slices.Collect(maps.Values(d.trackers))
}

// Choose projects the candidates' load and chooses one, by session
// binding or by the policy pipeline. An authoritative session store binds
// a new session here, before booking.
func (d *Decider) Choose(ctx context.Context, sc *Scratch, q *Query) (Choice, error) {
	s, err := d.lookupSession(ctx, q, sc.plan.now)
	if err != nil {
		return Choice{}, err
	}
	if err := d.project(sc); err != nil {
		return Choice{}, fmt.Errorf("%w: projecting load: %w", ErrInvalidRequest, err)
	}
	i, bound := -1, false
	if s.found && q.Pin == nil {
		i, bound = d.affine(ctx, sc, q, &s)
	}
	if i < 0 {
		if i, err = d.selectWorker(sc, q); err != nil {
			return Choice{}, err
		}
		if i, bound, err = d.bindFirst(ctx, sc, q, &s, i); err != nil {
			return Choice{}, err
		}
	}
	c := &sc.cands[i]
	return Choice{Worker: c.Info.Worker, CachedBlocks: int(c.Overlap.Device), Bound: bound, index: i, s: s}, nil
}

// Choice is the worker Choose picked, before booking.
type Choice struct {
	Worker routing.Worker
	// CachedBlocks is the predicted prefix the worker holds, in blocks.
	CachedBlocks int
	// Bound reports that a session binding decided the worker.
	Bound bool

	index int
	s     session
}

// selectWorker runs the policy pipeline and returns the chosen candidate's
// index in sc.cands.
func (d *Decider) selectWorker(sc *Scratch, q *Query) (int, error) {
	if q.Pin != nil && !q.allows(q.Pin.Worker) {
		return -1, fmt.Errorf("%w: pinned engine %d is outside the allowed set", ErrNoCompatibleWorker, q.Pin.Worker)
	}
	sc.preq = Request{ISLTokens: sc.plan.isl, BlockSize: sc.plan.blockSize, Pin: q.Pin, Allowed: q.Allowed,
		Thresholds: q.Thresholds, Overrides: q.Overrides}
	if err := d.pipe.RouteWith(&sc.dec, &sc.preq, sc.cands, q.Selector); err != nil {
		return -1, err
	}
	if i := findCandidate(sc.cands, sc.dec.Worker); i >= 0 {
		return i, nil
	}
	return -1, fmt.Errorf("%w: selector chose unknown worker %v", ErrNoCompatibleWorker, sc.dec.Worker)
}

// findCandidate returns the index of w in the sorted candidates, or -1.
func findCandidate(cands []Candidate, w routing.Worker) int {
	i, ok := slices.BinarySearchFunc(cands, w, func(c Candidate, w routing.Worker) int { return c.Info.Worker.Compare(w) })
	if !ok {
		return -1
	}
	return i
}

// maybeExpire frees bookings whose end never arrived and prunes the
// approximate indexes, at most once per ExpireInterval of the clock; the
// caller that wins the compare-and-swap does the sweep, so no goroutine is
// needed.
func (d *Decider) maybeExpire(now time.Time) {
	last := d.lastExpire.Load()
	if last != 0 && now.UnixNano()-last < int64(d.cfg.ExpireInterval) {
		return
	}
	if !d.lastExpire.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	for _, t := range d.allTrackers() {
		if n := t.Expire(now); n > 0 {
			d.cfg.Log.Warn("freed requests whose completion never arrived", "count", n)
		}
	}
	for _, a := range d.approxIndexes() {
		a.Prune(now)
	}
}

// RemoveWorker forgets a rank that left the fleet: its bookings and its
// entries in the approximate and side indexes. The exact index is its
// feeder's to clean.
func (d *Decider) RemoveWorker(w routing.Worker) {
	for _, t := range d.allTrackers() {
		t.RemoveWorker(w)
	}
	for _, a := range d.approxIndexes() {
		a.RemoveWorker(w)
	}
}

// Active is w's booked load at a block size.
func (d *Decider) Active(blockSize int, w routing.Worker) routing.Load {
	d.mu.RLock()
	t := d.trackers[blockSize]
	d.mu.RUnlock()
	if t == nil {
		return routing.Load{}
	}
	return t.Active(w)
}

// Booked is the number of active bookings at every block size.
func (d *Decider) Booked() int {
	n := 0
	for _, t := range d.allTrackers() {
		n += t.Len()
	}
	return n
}

// Candidates returns the candidates, sorted by worker, with their cached
// prefixes once Match has run and the loads that the last Choose on sc
// compared; valid until sc's next use.
func (sc *Scratch) Candidates() []Candidate { return sc.cands }
