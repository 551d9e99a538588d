package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/relay/consumer"
)

// ForwardedHeader marks a request one gateway forwarded to another; its
// value is the forwarding DC. A gateway serves such a request locally,
// whatever its own policy says, so a request crosses the WAN at most once.
const ForwardedHeader = "X-Kvrouter-Forwarded-From"

// DCHeader names the DC that served a request, on every proxied answer.
const DCHeader = "X-Kvrouter-DC"

// Gateway is a DC's OpenAI-compatible ingress. It is safe for concurrent
// use; Serve (or Run) owns its background goroutines.
type Gateway struct {
	cfg     Config
	homes   Homes
	remotes map[string]Remote
	blocks  map[string]int
	nodes   *nodePool
	// remoteGWs are each remote DC's gateways (remotes.go).
	remoteGWs map[string]*nodePool
	client    *http.Client
	transport *http.Transport
	metrics   *Metrics
	handler   http.Handler
	// admin serves the admin routes on their own listener (ServeAdmin).
	admin http.Handler
	// edge guards the routes and names sessions (Config.Edge).
	edge oaiedge.Edge
	// bodies reads request bodies under the configured limits.
	bodies oaiedge.BodyReader
	// intercept is the policy's consumer.Objective intercept.
	intercept func(consumer.LaneView) (float64, bool)
	// tracer starts the gateway's spans (tracing.go).
	tracer trace.Tracer
}

// New validates cfg and builds a Gateway; call Serve or Run to start its
// health polling.
func New(cfg Config) (*Gateway, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, remotes: map[string]Remote{}, blocks: map[string]int{},
		nodes: newNodePool(cfg.Nodes), metrics: NewMetrics(cfg.MetricLabels),
		bodies: oaiedge.BodyReader{MaxBytes: cfg.MaxBodyBytes, Timeout: oaiedge.BodyReadTimeout, Now: cfg.Now}}
	dcs := []string{cfg.DC}
	for _, r := range cfg.Remotes {
		r.URL = trimBase(r.URL)
		g.remotes[r.DC] = r
		dcs = append(dcs, r.DC)
	}
	g.homes = NewHomes(dcs...)
	g.remoteGWs = newRemotePools(cfg.Remotes)
	g.intercept = cfg.Policy.intercepts(g.remoteRTT)
	for _, p := range cfg.Pools {
		g.blocks[p.Model] = p.BlockSize
	}
	rt := cfg.Transport
	if rt == nil {
		g.transport = NewTransport(nil)
		rt = g.transport
	}
	g.client = &http.Client{Transport: rt, CheckRedirect: noRedirects}
	g.tracer = cfg.tracer()
	if err := g.setupEdge(); err != nil {
		return nil, err
	}
	g.handler = oaiedge.Traced(g.routes(), "kvrouter.gateway", cfg.TracerProvider)
	g.admin = g.adminRoutes()
	return g, nil
}

// NewTransport builds the upstream transport of a gateway: compression
// off so that answers pass through byte for byte and SSE flows event by
// event, and many idle connections per host because nodes and peer
// gateways are few. tlsClient is the trust for https upstreams (peers'
// gateways served over TLS); nil means the system's roots.
func NewTransport(tlsClient *tls.Config) *http.Transport {
	return &http.Transport{
		TLSClientConfig:     tlsClient,
		DialContext:         (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     oaiedge.IdleTimeout,
		DisableCompression:  true,
		ForceAttemptHTTP2:   true,
	}
}

// noRedirects stops the client from following redirects: the body must
// not be replayed to a place the configuration did not name.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Handler returns the gateway's HTTP handler (all routes).
func (g *Gateway) Handler() http.Handler { return g.handler }

// Metrics returns the gateway's metrics.
func (g *Gateway) Metrics() *Metrics { return g.metrics }

// setupEdge builds the access control, the session keys and the body
// budget of Config.Edge, counting refusals in the edge metrics.
func (g *Gateway) setupEdge() error {
	var err error
	if g.edge, err = g.cfg.Edge.Build(g.cfg.MaxBodyBytes, g.metrics.Registerer()); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if t := g.cfg.Edge.UpstreamToken; t != "" {
		if _, err := oaiedge.NewKeys(t); err != nil {
			return fmt.Errorf("%w: node_operator_token: %w", ErrConfig, err)
		}
	}
	g.bodies.Budget = g.edge.Budget
	return nil
}

// EdgeMetrics returns the gateway's access and certificate metrics.
func (g *Gateway) EdgeMetrics() *metrics.Edge { return g.edge.Metrics }

// routes builds the route table (oaiedge.NewMux adds the routed
// endpoints, /health, /ready and the OpenAI-shaped 404 and 405). The
// admin routes are served here too, unless Edge.AdminAddr keeps
// /metrics and /v1/route/explain on the admin listener alone.
func (g *Gateway) routes() http.Handler {
	own := []oaiedge.Route{
		{Pattern: "GET /v1/models", Handler: g.handleModels},
		{Pattern: "GET /v1/models/{id}", Handler: g.handleModel},
		{Pattern: "GET /v1/sessions/{id}/home", Handler: g.handleHome, Scope: oaiedge.ScopeAdmin},
	}
	if g.cfg.Edge.AdminAddr == "" {
		own = append(own, g.observability()...)
	}
	return oaiedge.NewMux(errorTable, g.edge.Access, g.completionHandler, g.nodes.anyHealthy, own...)
}

// adminRoutes builds the admin listener's route table.
func (g *Gateway) adminRoutes() http.Handler {
	own := append([]oaiedge.Route{{Pattern: "GET /v1/sessions/{id}/home", Handler: g.handleHome, Scope: oaiedge.ScopeAdmin}},
		g.observability()...)
	return oaiedge.NewMux(errorTable, g.edge.Access, nil, g.nodes.anyHealthy, own...)
}

// observability are the routes that may move to the admin listener.
func (g *Gateway) observability() []oaiedge.Route {
	return []oaiedge.Route{
		{Pattern: "POST /v1/route/explain", Handler: g.handleExplain, Scope: oaiedge.ScopeAdmin},
		{Pattern: "GET /metrics", Handler: g.metrics.Handler().ServeHTTP, Scope: oaiedge.ScopeAdmin},
	}
}

// Run polls the router nodes' readiness until ctx ends, then releases
// the transport's idle connections.
func (g *Gateway) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { g.pollRemotes(ctx) })
	g.nodes.pollLoop(ctx, g.client, g.cfg.HealthInterval)
	wg.Wait()
	if g.transport != nil {
		g.transport.CloseIdleConnections()
	}
	return nil
}

// Serve serves HTTP on ln and runs the health polling until ctx ends,
// then shuts the server down, waiting for in-flight requests up to
// shutdownGrace before closing them.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	pollCtx, stopPoll := context.WithCancel(ctx)
	wg.Go(func() { _ = g.Run(pollCtx) })
	err := oaiedge.ServeUntil(ctx, g.httpServer(g.handler, ln), ln, shutdownGrace)
	stopPoll()
	wg.Wait()
	return err
}

// httpServer serves h on ln with the edge's timeouts.
func (g *Gateway) httpServer(h http.Handler, ln net.Listener) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: oaiedge.ReadHeaderTimeout, IdleTimeout: oaiedge.IdleTimeout,
		MaxHeaderBytes: oaiedge.MaxHeaderBytes, ConnContext: oaiedge.ConnContext(ln)}
}

// ServeAdmin serves the admin routes, /health and /ready on ln until ctx
// ends. Serve runs the health polling; this listener needs none.
func (g *Gateway) ServeAdmin(ctx context.Context, ln net.Listener) error {
	return oaiedge.ServeUntil(ctx, g.httpServer(g.admin, ln), ln, ControlTimeout)
}

// shutdownGrace is how long Serve waits for in-flight requests: long
// enough for most streams to finish, short of an orchestrator's kill.
const shutdownGrace = 30 * time.Second
