package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Lifecycle errors.
var (
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("fleet: already started")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("fleet: closed")
)

// Plane is one router node's NATS event plane for one DC: the engine
// registry and, unless Config.NoKVEvents, the KV event ingestion into the
// index. Build it with New, then Start; Close stops it.
type Plane struct {
	cfg Config
	nc  *nats.Conn
	m   *metrics.Metrics
	log *slog.Logger
	reg *Registry
	ctr *counters
	ing *ingester
	// work carries decoded batches, snapshot answers and registry changes
	// to the applier goroutine, the only writer of the index.
	work chan item

	mu     sync.Mutex
	state  int
	subs   []subscription
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// started is when the discover request went out (UnixNano; 0 before).
	started atomic.Int64
	// warnRefusals throttles the warning about refused engine messages.
	warnRefusals rate.Sometimes
}

// subscription is one of the plane's subscriptions, with the message type
// it carries and the count of messages the NATS client dropped unread
// because its backlog was full (counted as refused, reason "overflow").
type subscription struct {
	sub     *nats.Subscription
	message string
	dropped int
}

// Backlog bounds of the subscriptions (messages, bytes). The KV stream may
// burst far beyond the NATS client's defaults while the applier is busy;
// losing messages there only costs a resync, but there is no reason to
// lose them early. Cards and deregistrations get a bounded backlog: beyond
// it a flood is dropped unread (and counted) instead of growing memory.
// Heartbeats get their own, so a flood of cards never delays them.
var (
	kvBacklog        = [2]int{1 << 20, 256 << 20}
	cardBacklog      = [2]int{4096, 16 << 20}
	heartbeatBacklog = [2]int{1 << 16, 64 << 20}
)

// Plane lifecycle states.
const (
	stateNew = iota
	stateStarted
	stateClosed
)

// itemKind says what an applier work item carries.
type itemKind uint8

const (
	itemBatch itemKind = iota
	itemSnapshot
	itemReset
	itemRemove
	itemTail
)

// item is one unit of applier work.
type item struct {
	kind   itemKind
	w      routing.Worker
	inc    uint64
	events []routing.Event
	err    error
	// n is the rank count (itemReset) or the heartbeat's last event id
	// (itemTail).
	n    uint64
	snap snapshotResult
}

// New builds a plane over an open NATS connection, which the caller owns
// and closes after Close. idx may be nil only with Config.NoKVEvents; m
// and log may be nil.
func New(cfg Config, nc *nats.Conn, idx Index, m *metrics.Metrics, log *slog.Logger) (*Plane, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, fmt.Errorf("%w: nats connection is nil", ErrConfig)
	}
	if idx == nil && !cfg.NoKVEvents {
		return nil, fmt.Errorf("%w: an index is required unless no_kv_events is set", ErrConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("dc", cfg.DC)
	p := &Plane{
		cfg: cfg, nc: nc, m: m, log: log, reg: NewRegistry(cfg.LivenessTimeout, m), ctr: newCounters(m),
		work:         make(chan item, cfg.QueueLength),
		warnRefusals: rate.Sometimes{Interval: refusalLogEvery},
	}
	p.reg.SetLimits(Limits{MaxEngines: cfg.MaxEngines, Rate: cfg.RegistrationRate, Burst: cfg.RegistrationBurst})
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if !cfg.NoKVEvents {
		p.ing = newIngester(idx, p.reg, p.ctr, log, cfg.MaxBufferedEvents, p.fetch)
		p.reg.OnRemove(func(e Engine) { p.post(item{kind: itemRemove, w: routing.Worker{ID: e.ID}}) })
	}
	return p, nil
}

// Discovered reports whether the registry may be taken to know every live
// engine: Config.DiscoverWait has passed since Start asked all engines
// for their cards. A router cluster node serves only after it, so that a
// restarted node does not take a bound engine it has not heard of yet for
// a departed one.
func (p *Plane) Discovered() bool {
	t := p.started.Load()
	return t != 0 && p.cfg.Now().UnixNano()-t >= int64(p.cfg.DiscoverWait)
}

// Registry returns the engine registry, the decision path's read API.
func (p *Plane) Registry() *Registry { return p.reg }

// Stats returns the plane's counters.
func (p *Plane) Stats() Stats { return p.ctr.stats() }

// Start subscribes and starts the applier and the liveness sweeper. The
// KV subscription is made (and flushed to the server) before the
// registration one, so that the snapshot a new card triggers never misses
// events published after it. Cancelling ctx stops the goroutines as Close
// does, but only Close unsubscribes.
func (p *Plane) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case stateStarted:
		return ErrStarted
	case stateClosed:
		return ErrClosed
	}
	p.state = stateStarted
	stop := context.AfterFunc(ctx, p.cancel)
	p.wg.Go(func() { <-p.ctx.Done(); stop() })
	if err := p.subscribe(); err != nil {
		return err
	}
	if p.ing != nil {
		p.wg.Go(p.apply)
	}
	p.wg.Go(p.sweep)
	return nil
}

// refusalLogEvery is the least time between two warnings about refused
// engine messages; the metric counts every one.
const refusalLogEvery = 10 * time.Second

// subscribe makes one subscription per message type, each delivered on
// its own goroutine of the NATS client: heartbeats never wait behind
// cards.
func (p *Plane) subscribe() error {
	if p.ing != nil {
		if err := p.sub(kvrpb.SubjectKVAll(p.cfg.DC), "kv", kvBacklog, p.onBatch); err != nil {
			return err
		}
	}
	dc := p.cfg.DC
	if err := p.sub(kvrpb.SubjectHeartbeatAll(dc), "heartbeat", heartbeatBacklog, p.onHeartbeat); err != nil {
		return err
	}
	if err := p.sub(kvrpb.SubjectRegisterAll(dc), "card", cardBacklog, p.onCard); err != nil {
		return err
	}
	if err := p.sub(kvrpb.SubjectDeregisterAll(dc), "deregister", cardBacklog, p.onDeregister); err != nil {
		return err
	}
	if err := p.subscribeV1(); err != nil {
		return err
	}
	if err := p.nc.Flush(); err != nil {
		return fmt.Errorf("fleet: flush subscriptions: %w", err)
	}
	if err := p.nc.Publish(kvrpb.SubjectDiscover(p.cfg.DC), nil); err != nil {
		return fmt.Errorf("fleet: discover: %w", err)
	}
	p.started.Store(p.cfg.Now().UnixNano())
	p.setConnected()
	return nil
}

func (p *Plane) sub(subject, message string, backlog [2]int, h nats.MsgHandler) error {
	s, err := p.nc.Subscribe(subject, h)
	if err != nil {
		return fmt.Errorf("fleet: subscribe %s: %w", subject, err)
	}
	_ = s.SetPendingLimits(backlog[0], backlog[1])
	p.subs = append(p.subs, subscription{sub: s, message: message})
	return nil
}

// countOverflow counts the messages each subscription dropped unread
// since the last call. The sweeper calls it.
func (p *Plane) countOverflow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.subs {
		s := &p.subs[i]
		n, err := s.sub.Dropped()
		if err != nil || n <= s.dropped {
			continue
		}
		p.ctr.refuse(s.message, reasonOverflow, n-s.dropped)
		s.dropped = n
	}
}

// Close unsubscribes, stops the goroutines and waits for them. It is
// idempotent; the NATS connection stays open.
func (p *Plane) Close() error {
	p.mu.Lock()
	if p.state == stateClosed {
		p.mu.Unlock()
		return nil
	}
	p.state = stateClosed
	var errs []error
	for _, s := range p.subs {
		if err := s.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, err)
		}
	}
	p.subs = nil
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return errors.Join(errs...)
}

// post hands an item to the applier unless the plane is stopping.
func (p *Plane) post(it item) {
	select {
	case p.work <- it:
	case <-p.ctx.Done():
	}
}

// offer hands an item to the applier if its queue has room, and reports
// whether it did.
func (p *Plane) offer(it item) bool {
	select {
	case p.work <- it:
		return true
	default:
		return false
	}
}

// apply is the applier goroutine: every index write happens here, in the
// order the items were queued.
func (p *Plane) apply() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case it := <-p.work:
			p.handle(it)
		}
	}
}

func (p *Plane) handle(it item) {
	switch it.kind {
	case itemBatch:
		p.ing.handleDecoded(it.w, it.inc, it.events, it.err)
	case itemSnapshot:
		p.ing.applySnapshot(it.snap)
	case itemReset:
		p.ing.reset(it.w.ID, uint32(it.n))
	case itemRemove:
		p.ing.remove(it.w.ID)
	case itemTail:
		p.ing.tail(it.w, it.n)
	}
}

// sweep is the liveness goroutine. It measures its own ticks on the real
// clock: a gap longer than pausedGap means the process was not running
// (or not scheduled), and the registry is told so that the engines'
// silence during it does not count (Registry.Sweep). Time during which
// this node's own NATS connection is down does not count either: an
// engine is judged silent only while the node could have heard it.
func (p *Plane) sweep() {
	t := time.NewTicker(p.cfg.SweepInterval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			var paused time.Duration
			gap := time.Since(last)
			switch {
			case gap > p.pausedGap():
				paused = gap
				p.log.Warn("this node was paused; engines' silence during the pause is not counted", "for", gap)
			case !p.nc.IsConnected():
				// The bus is down on this node's side: heartbeats cannot
				// reach it, so the engines' silence is not theirs. Without
				// this, an outage of the NATS server longer than the
				// liveness timeout expired every engine and moved every
				// hard-affinity session (chaos S10).
				paused = gap
			}
			last = time.Now()
			for _, e := range p.reg.Sweep(p.cfg.Now(), paused) {
				p.log.Info("engine expired", "worker", uint64(e.ID), "last_seen", e.LastSeen)
			}
			p.setConnected()
			p.countOverflow()
		}
	}
}

// pausedGap is the gap between sweeps that means this node was paused:
// half the liveness timeout, and at least four sweep intervals.
func (p *Plane) pausedGap() time.Duration {
	return max(p.cfg.LivenessTimeout/2, 4*p.cfg.SweepInterval)
}

func (p *Plane) setConnected() {
	if p.m == nil {
		return
	}
	v := 0.0
	if p.nc.IsConnected() {
		v = 1
	}
	p.m.NATSConnected.Set(v)
}
