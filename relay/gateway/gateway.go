package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

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
	cfg       Config
	homes     Homes
	remotes   map[string]Remote
	blocks    map[string]int
	nodes     *nodePool
	client    *http.Client
	transport *http.Transport
	metrics   *Metrics
	handler   http.Handler
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
	g.handler = g.withTracing(g.routes())
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

// Homes returns the gateway's session home ranking.
func (g *Gateway) Homes() Homes { return g.homes }

// Client returns the HTTP client the gateway uses upstream, for building
// an HTTPLocator on the same connections.
func (g *Gateway) Client() *http.Client { return g.client }

// routes builds the route table (oaiedge.NewMux adds the completion
// endpoints, /health, /ready and the OpenAI-shaped 404 and 405).
func (g *Gateway) routes() http.Handler {
	return oaiedge.NewMux(errorTable, g.completionHandler, g.nodes.anyHealthy,
		oaiedge.Route{Pattern: "GET /v1/models", Handler: g.handleModels},
		oaiedge.Route{Pattern: "GET /v1/sessions/{id}/home", Handler: g.handleHome},
		oaiedge.Route{Pattern: "POST /v1/route/explain", Handler: g.handleExplain},
		oaiedge.Route{Pattern: "GET /metrics", Handler: g.metrics.Handler().ServeHTTP})
}

// Run polls the router nodes' readiness until ctx ends, then releases
// the transport's idle connections.
func (g *Gateway) Run(ctx context.Context) error {
	g.nodes.pollLoop(ctx, g.client, g.cfg.HealthInterval)
	if g.transport != nil {
		g.transport.CloseIdleConnections()
	}
	return nil
}

// Serve serves HTTP on ln and runs the health polling until ctx ends,
// then shuts the server down, waiting for in-flight requests up to
// shutdownGrace before closing them.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: g.handler, ReadHeaderTimeout: oaiedge.ReadHeaderTimeout, IdleTimeout: oaiedge.IdleTimeout,
		MaxHeaderBytes: oaiedge.MaxHeaderBytes}
	var wg sync.WaitGroup
	pollCtx, stopPoll := context.WithCancel(ctx)
	wg.Go(func() { _ = g.Run(pollCtx) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		err = srv.Shutdown(sctx)
		cancel()
		if err != nil {
			err = srv.Close()
		}
		<-errc
	case err = <-errc:
	}
	stopPoll()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// shutdownGrace is how long Serve waits for in-flight requests: long
// enough for most streams to finish, short of an orchestrator's kill.
const shutdownGrace = 30 * time.Second
