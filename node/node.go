package node

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/fleet/declared"
	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/secure"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/frontend"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// Node is one router node. Build it with New, then Run it.
type Node struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Metrics
	addr    atomic.Pointer[net.TCPAddr]
	ready   chan struct{}
	// ended is closed when Run returns, runErr holding its error.
	ended   chan struct{}
	runErr  error
	natsURL atomic.Pointer[string]
	reg     atomic.Pointer[fleet.Registry]
	// serving reports whether the node serves requests (set by Run).
	serving atomic.Pointer[func() bool]
	// clusterNode is the raft member in cluster mode, once Run started it.
	clusterNode atomic.Pointer[consensus.Node]
	// tls serves the client-facing API over HTTPS when set, its
	// certificate from certs.
	tls   *tls.Config
	certs *mtls.Reloader
	// selAddrs are the selection edges' addresses (selection_edges.go).
	selAddrs selectionAddrs
}

// Ready reports what GET /ready reports: the node serves requests (a
// cluster member: caught up, and its registry has discovered the fleet)
// and knows at least one engine. False before Run.
func (n *Node) Ready() bool {
	f := n.serving.Load()
	return f != nil && (*f)() && n.Engines() > 0
}

// Cluster returns the node's raft member in cluster mode once Run has
// started it, or nil.
func (n *Node) Cluster() *consensus.Node { return n.clusterNode.Load() }

// Engines is the number of live engines the node knows, 0 before Run.
func (n *Node) Engines() int {
	if r := n.reg.Load(); r != nil {
		return len(r.Engines())
	}
	return 0
}

// New validates cfg and returns a node that Run will start.
func New(cfg Config, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("dc", cfg.DC, "node", cfg.NodeID)
	if err := secure.Check(cfg.listeners(), cfg.Exposure.Insecure, log); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n := &Node{cfg: cfg, log: log, metrics: metrics.New(metrics.WithConstLabels(prometheus.Labels{"dc": cfg.DC, "node": cfg.NodeID})), ready: make(chan struct{}), ended: make(chan struct{})}
	n.metrics.SetIdentity(cfg.NodeID, cfg.DC)
	var err error
	if n.tls, err = n.edgeTLS(); err != nil {
		return nil, err
	}
	if n.cfg.Frontend.Tokenizers, err = cfg.loadTokenizers(); err != nil {
		return nil, err
	}
	for model := range n.cfg.Frontend.Tokenizers {
		log.Info("text prompts routed by the model's own tokens", "model", model)
	}
	if cfg.EngineTLSCA != "" {
		if n.cfg.Frontend.EngineRootCAs, err = mtls.CAPool("engine_tls_ca", cfg.EngineTLSCA); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return n, nil
}

// Metrics exposes the node's metric set (for tests and embedding).
func (n *Node) Metrics() *metrics.Metrics { return n.metrics }

// Addr is the frontend's listen address once WaitReady has returned.
func (n *Node) Addr() net.Addr {
	if a := n.addr.Load(); a != nil {
		return a
	}
	return nil
}

// NATSURL is the URL of the NATS server the node uses, once WaitReady has
// returned; engines of an embedded setup connect there.
func (n *Node) NATSURL() string {
	if u := n.natsURL.Load(); u != nil {
		return *u
	}
	return ""
}

// WaitReady blocks until the node listens, Run returns first (the error
// says why the node never became ready), or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-n.ended:
		select {
		case <-n.ready:
			return nil
		default:
		}
		return fmt.Errorf("%w: %w", ErrStoppedBeforeReady, cmp.Or(n.runErr, context.Canceled))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrStoppedBeforeReady is returned by WaitReady when Run returned before
// the node was ready.
var ErrStoppedBeforeReady = errors.New("node stopped before it was ready")

// Run starts every component, serves until ctx ends and stops them again.
// A Node runs once.
func (n *Node) Run(ctx context.Context) (err error) {
	defer func() {
		n.runErr = err
		close(n.ended)
	}()
	return n.run(ctx)
}

// run is Run's body.
func (n *Node) run(ctx context.Context) error {
	bus, err := natsbus.Open(n.cfg.natsConfig(n.natsState, n.metrics.NATSViolation), n.log)
	if err != nil {
		return err
	}
	defer bus.Close()
	url := bus.URL()
	n.natsURL.Store(&url)

	var (
		idx   *index.Exact
		plIdx fleet.Index
		opts  []dispatch.Option
		cl    *cluster
	)
	if n.cfg.Cluster.Enabled() {
		if cl, err = n.startCluster(ctx); err != nil {
			return err
		}
		defer cl.close()
		idx = cl.idx
		if !n.cfg.Dispatch.ApproximateMode {
			plIdx = newRaftIngest(cl.cn, cl.batcher, n.log, n.metrics.Sec())
		}
		if cl.sessions != nil {
			opts = append(opts, dispatch.WithBindings(raftBindings{s: cl.sessions, cn: cl.cn}))
		}
		opts = append(opts, dispatch.WithThresholdSource(thresholdSource(cl.cn.FSM())))
	} else if !n.cfg.Dispatch.ApproximateMode {
		idx = index.NewExact()
		plIdx = idx
	}
	plane, err := fleet.New(n.cfg.Events, bus.Conn, plIdx, n.metrics, n.log)
	if err != nil {
		return err
	}
	reg := plane.Registry()
	sets := fleet.NewWorkerSets(n.log)
	if cl != nil {
		sets.Follow(fsmIncumbents{f: cl.cn.FSM()}) // every node routes a set to the leader's choice
	}
	reg.UseWorkerSets(sets)
	n.reg.Store(reg)
	for _, sp := range n.cfg.declared {
		// A static entry owns its URL and id even before its first probe.
		plane.DeclaredSink().Reserve(declared.EngineID(sp.URL), sp.URL)
	}
	// A cluster member serves once it has caught up with the leader and
	// its registry knows the fleet: before that a bound engine it has not
	// heard of would look departed, and the binding would move. (A single
	// node's bindings do not outlive it, so it serves at once.)
	gate := &engineGate{min: n.cfg.MinInitialEngines, count: n.Engines}
	ready := func() bool {
		return (cl == nil || (plane.Discovered() && cl.cn.CaughtUp())) && gate.ready()
	}
	n.serving.Store(&ready)
	if cl != nil {
		n.clusterNode.Store(cl.cn)
	}
	disp, err := dispatch.New(n.cfg.Dispatch, engines{r: reg}, idx, n.metrics, n.log, opts...)
	if err != nil {
		return err
	}
	reg.OnSilent(func(e fleet.Engine) { disp.EngineSilent(e.ID) })
	reg.OnRemove(func(e fleet.Engine) { disp.RemoveEngine(e.ID) })
	if err := plane.Start(ctx); err != nil {
		return err
	}
	defer plane.Close()
	stopDeclared, err := n.startDeclared(ctx, plane, plIdx)
	if err != nil {
		return err
	}
	defer stopDeclared()
	if cl != nil {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cl.wg.Go(func() { cl.reserveSets(wctx, plane, sets, reserveEvery) })
	}
	if cl != nil && plIdx != nil {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cl.wg.Go(func() { cl.reconcile(rctx, plane, n.cfg.Events.LivenessTimeout) })
	}
	return n.serve(ctx, disp, reg)
}

// startDeclared probes the engines declared by engine and engine_dns
// entries, if any, and returns what stops the probes.
func (n *Node) startDeclared(ctx context.Context, plane *fleet.Plane, idx fleet.Index) (func(), error) {
	if len(n.cfg.declared) == 0 && len(n.cfg.declaredDNS) == 0 {
		return func() {}, nil
	}
	events, err := n.engineEvents(idx)
	if err != nil {
		return nil, err
	}
	client := n.engineClient()
	m, err := declared.NewManager(declared.Config{APIKey: n.cfg.Frontend.EngineAPIKey, Log: n.log,
		Client: client, Failures: n.metrics.EngineProbeFailures, Events: events, Resolver: n.cfg.resolver()},
		n.cfg.declared, n.cfg.declaredDNS, plane.DeclaredSink())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	n.log.Info("probing declared engines", "sources", m.String())
	return func() { cancel(); <-done; client.CloseIdleConnections() }, nil
}

// engineClient is the HTTP client of the engine probes: it trusts the
// engines' CA like the proxy does.
func (n *Node) engineClient() *http.Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}
	if n.cfg.Frontend.EngineRootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: n.cfg.Frontend.EngineRootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}
}

func (n *Node) serve(ctx context.Context, disp *dispatch.Dispatcher, reg *fleet.Registry) error {
	fcfg := n.cfg.Frontend
	fcfg.Ready = n.Ready
	fcfg.DC = n.cfg.DC
	if n.cfg.Drain.Timeout > 0 {
		fcfg.ShutdownTimeout = n.cfg.Drain.Timeout
	}
	fcfg.Admin.Thresholds = n.thresholdStore(disp)
	if n.cfg.Cluster.Enabled() || n.cfg.MinInitialEngines > 0 {
		fcfg.Serving = *n.serving.Load()
	}
	shutdownTracing, err := n.tracing(ctx, &fcfg)
	if err != nil {
		return err
	}
	defer shutdownTracing()
	edges, err := n.startSelection(disp, &fcfg, fcfg.Serving)
	if err != nil {
		return err
	}
	defer func() { edges.stop(cmpOr(fcfg.ShutdownTimeout, frontend.ShutdownTimeout)) }()
	fe, err := frontend.New(fcfg, disp, n.metrics, n.log)
	if err != nil {
		return err
	}
	n.watchCerts(fe)
	waitAdmin, err := n.serveAdmin(ctx, fe)
	if err != nil {
		return err
	}
	defer waitAdmin()
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http_addr %s: %w", n.cfg.HTTPAddr, err)
	}
	n.addr.Store(ln.Addr().(*net.TCPAddr))
	if n.tls != nil {
		ln = tls.NewListener(ln, n.tls)
	}
	close(n.ready)
	n.log.Info("router node serving", "http", ln.Addr().String(), "https", n.tls != nil, "nats", n.NATSURL(),
		"policy", n.cfg.Dispatch.Policy, "kv_events", !n.cfg.Dispatch.ApproximateMode)
	err = n.serveUntilDrained(ctx, fe, func(ctx context.Context) error { return fe.Serve(ctx, ln) })
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (n *Node) natsState(up bool) {
	v := 0.0
	if up {
		v = 1
	}
	n.metrics.NATSConnected.Set(v)
}

// engines adapts the event plane's registry to what the dispatcher reads.
// (A cluster member that has not caught up never routes: the frontend's
// Serving gate answers 503 before the dispatcher is asked.)
type engines struct{ r *fleet.Registry }

var _ dispatch.Engines = engines{}
var _ dispatch.LoadReporter = engines{}
var _ dispatch.Bootstrapper = engines{}

// Workers lists the model's admitted workers. Whether the model is known
// at all is asked of the registry only when none is admitted: a model
// with a worker is served, and listing every model (a copy and a sort)
// on every request bought nothing.
func (e engines) Workers(model string) ([]routing.WorkerInfo, bool) {
	if ws := e.r.Workers(model); len(ws) > 0 {
		return ws, true
	}
	return nil, slices.Contains(e.r.Models(), model)
}

func (e engines) Endpoint(id routing.WorkerID) (string, bool) { return e.r.Endpoint(id) }

func (e engines) Load(w routing.Worker) (routing.Load, bool) { return e.r.Load(w) }

func (e engines) BootstrapPort(id routing.WorkerID) (uint32, bool) { return e.r.BootstrapPort(id) }

func (e engines) Models() []dispatch.Model {
	byModel := map[string]*dispatch.Model{}
	var out []dispatch.Model
	for _, eng := range e.r.Engines() {
		m, ok := byModel[eng.Model]
		if !ok {
			out = append(out, dispatch.Model{ID: eng.Model, Created: eng.Registered})
			m = &out[len(out)-1]
			byModel[eng.Model] = m
		}
		m.Engines++
		if eng.Registered.Before(m.Created) {
			m.Created = eng.Registered
		}
	}
	return out
}
