package declared

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Sink takes what the probers learn: the router's engine registry.
// Card registers or refreshes an engine, Beat reports its load, Leave
// removes an engine the declarations no longer list. It must be safe for
// concurrent use.
type Sink interface {
	Card(c *kvrpb.WorkerCard) error
	Beat(h *kvrpb.Heartbeat) error
	Leave(id routing.WorkerID, incarnation uint64)
}

// Config tunes discovery and probing. Zero fields take the defaults.
type Config struct {
	// Interval is the probe period: an engine that stops answering stops
	// heartbeating at once, and the registry's liveness timeout (3 s by
	// default) removes it; 1 s leaves room for two lost probes.
	Interval time.Duration
	// Timeout bounds one probe (health, models and metrics together).
	Timeout time.Duration
	// ResolveInterval is how often DNS sources are looked up again: 10 s
	// follows a scaled StatefulSet within one Kubernetes DNS TTL or two.
	ResolveInterval time.Duration
	// Client makes the probes; APIKey is sent as a bearer token to engines
	// started with --api-key.
	Client *http.Client
	APIKey string
	// Resolver looks DNS sources up; nil is net.DefaultResolver.
	Resolver Resolver
	Log      *slog.Logger
	// Failures counts failed probes by reason; nil counts nothing.
	Failures *prometheus.CounterVec
	// Events, when set, follows the KV events of every declared rank
	// that publishes them (Spec.KVEvents) for as long as the engine is
	// declared: the manager calls it on a goroutine of its own per rank
	// and cancels ctx when the engine leaves the declarations.
	Events func(ctx context.Context, w routing.Worker, sp Spec)
}

// Defaults of Config.
const (
	DefaultInterval        = time.Second
	DefaultTimeout         = 2 * time.Second
	DefaultResolveInterval = 10 * time.Second
)

func (c *Config) setDefaults() {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ResolveInterval <= 0 {
		c.ResolveInterval = DefaultResolveInterval
	}
	if c.Client == nil {
		c.Client = &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: c.Timeout}).DialContext,
			MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}}
	}
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

func (c *Config) fail(reason string) {
	if c.Failures != nil {
		c.Failures.WithLabelValues(reason).Inc()
	}
}

// Manager runs the probers of every declared engine, following the DNS
// sources' changes.
type Manager struct {
	cfg    Config
	sink   Sink
	static []Spec
	dns    []DNSSpec
}

// NewManager validates the static specs (grouped by URL) and returns a
// manager; Run starts it.
func NewManager(cfg Config, static []Spec, dns []DNSSpec, sink Sink) (*Manager, error) {
	if sink == nil {
		return nil, errors.New("declared: nil sink")
	}
	if _, err := Group(static); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Manager{cfg: cfg, sink: sink, static: static, dns: dns}, nil
}

// running is one prober and what stops it.
type running struct {
	eng    Engine
	cancel context.CancelFunc
	done   chan struct{}
	p      *prober
}

// update is one source's current specs.
type update struct {
	source int
	specs  []Spec
}

// Run probes the declared engines until ctx ends, then stops every
// goroutine it started and returns.
func (m *Manager) Run(ctx context.Context) {
	updates := make(chan update)
	var wg sync.WaitGroup
	for i := range m.dns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.follow(ctx, i+1, &m.dns[i], updates)
		}()
	}
	sources := map[int][]Spec{0: m.static}
	live := map[string]*running{}
	m.reconcile(ctx, sources, live)
	for {
		select {
		case <-ctx.Done():
			for _, r := range live {
				r.cancel()
				<-r.done
			}
			wg.Wait()
			return
		case u := <-updates:
			sources[u.source] = u.specs
			m.reconcile(ctx, sources, live)
		}
	}
}

// follow resolves one DNS source every ResolveInterval and sends its specs
// when they change. A failed lookup keeps the last answer: a DNS outage
// must not empty the fleet.
func (m *Manager) follow(ctx context.Context, source int, d *DNSSpec, out chan<- update) {
	var last []Spec
	first := true
	for {
		specs, err := d.Resolve(ctx, m.cfg.Resolver)
		switch {
		case err != nil && ctx.Err() == nil:
			m.cfg.fail("dns")
			m.cfg.Log.Warn("engine discovery lookup failed; keeping the last answer", "source", d.String(), "err", err)
		case err == nil && (first || !reflect.DeepEqual(specs, last)):
			first, last = false, specs
			select {
			case out <- update{source, specs}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.cfg.ResolveInterval):
		}
	}
}

// reconcile starts probers for new engines, and stops (then removes from
// the sink) engines no source lists any more or whose specs changed.
func (m *Manager) reconcile(ctx context.Context, sources map[int][]Spec, live map[string]*running) {
	var all []Spec
	for _, s := range sources {
		all = append(all, s...)
	}
	engines, err := Group(all)
	if err != nil {
		m.cfg.Log.Error("engine declarations conflict; keeping the current set", "err", err)
		return
	}
	want := map[string]Engine{}
	for _, e := range engines {
		want[e.URL] = e
	}
	for url, r := range live {
		if e, ok := want[url]; ok && reflect.DeepEqual(e, r.eng) {
			continue
		}
		r.cancel()
		<-r.done
		m.sink.Leave(r.eng.ID, r.p.incarnation)
		m.cfg.Log.Info("declared engine removed", "engine", url, "worker", uint64(r.eng.ID))
		delete(live, url)
	}
	for url, e := range want {
		if live[url] == nil {
			live[url] = m.start(ctx, e)
		}
	}
}

func (m *Manager) start(ctx context.Context, e Engine) *running {
	ctx, cancel := context.WithCancel(ctx)
	r := &running{eng: e, cancel: cancel, done: make(chan struct{}), p: &prober{e: e, cfg: &m.cfg, sink: m.sink}}
	var wg sync.WaitGroup
	wg.Go(func() { r.p.run(ctx) })
	for rank, sp := range e.Ranks {
		if sp.KVEvents != "" && m.cfg.Events != nil {
			wg.Go(func() { m.cfg.Events(ctx, routing.Worker{ID: e.ID, Rank: uint32(rank)}, sp) })
		}
	}
	go func() {
		defer close(r.done)
		wg.Wait()
	}()
	return r
}

// String describes the manager's sources for logs.
func (m *Manager) String() string {
	return fmt.Sprintf("%d static engine entries, %d DNS sources", len(m.static), len(m.dns))
}
