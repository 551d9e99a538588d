package frontend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// tracerName names the frontend's tracer.
const tracerName = "github.com/kvrouter/kvrouter/node/frontend"

// Server is the node's OpenAI-compatible HTTP frontend and reverse proxy.
type Server struct {
	cfg     Config
	router  dispatch.Router
	metrics *metrics.Metrics
	// observers caches metrics' children per model.
	observers observerCache
	// prompts tokenizes text prompts (exact.go).
	prompts *prompts
	log     *slog.Logger
	tracer  trace.Tracer
	// engines sends requests to engines. It is the transport itself, not
	// an http.Client: the client's redirect handling (engine redirects are
	// not followed, so it would only hand back the response), its copy of
	// every request's headers and its error wrapping cost each request and
	// buy nothing here.
	engines http.RoundTripper
	// transport is set when the Server built its own engine client, which
	// it then closes when Serve returns.
	transport *http.Transport
	// errs is the error table, with Config.OverloadStatus.
	errs oaiedge.Table
	// bodies reads request bodies under the configured limits.
	bodies  oaiedge.BodyReader
	handler http.Handler
	// admin serves the admin routes on a listener of their own
	// (ServeAdmin).
	admin http.Handler
	// edge guards the routes and names sessions (Config.Edge).
	edge     oaiedge.Edge
	draining atomic.Bool
	idPrefix string
	idSeq    atomic.Uint64
	// engineAuth is the Authorization value sent to engines, built once
	// from Config.EngineAPIKey ("" without a key).
	engineAuth string
}

// New builds a Server. m and log may be nil (no metrics, no logs).
func New(cfg Config, r dispatch.Router, m *metrics.Metrics, log *slog.Logger) (*Server, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nil router", ErrConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s := &Server{cfg: cfg, router: r, metrics: m, observers: observerCache{m: m}, log: log, tracer: tp.Tracer(tracerName),
		errs:   errorTable(cfg.OverloadStatus),
		bodies: oaiedge.BodyReader{MaxBytes: cfg.MaxBodyBytes, Timeout: cfg.BodyReadTimeout, Now: cfg.Now}}
	s.prompts = newPrompts(cfg.Tokenizers, m, log)
	if cfg.EngineAPIKey != "" {
		s.engineAuth = "Bearer " + cfg.EngineAPIKey
	}
	if err := s.setupEdge(); err != nil {
		return nil, err
	}
	rt := cfg.Transport
	if rt == nil {
		s.transport = newTransport(cfg)
		rt = s.transport
	}
	s.engines = rt
	s.idPrefix = randomPrefix()
	s.handler = oaiedge.Traced(s.routes(), "kvrouter.node", cfg.TracerProvider)
	s.admin = s.adminRoutes()
	return s, nil
}

// setupEdge builds the access control, the session keys and the body
// budget from Config.Edge, counting refusals in the edge metrics.
func (s *Server) setupEdge() error {
	var reg prometheus.Registerer
	if s.metrics != nil {
		reg = s.metrics.Registerer()
	}
	var err error
	if s.edge, err = s.cfg.Edge.Build(s.cfg.MaxBodyBytes, reg); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.bodies.Budget = s.edge.Budget
	return nil
}

// EdgeMetrics returns the edge's access and certificate metrics (nil
// without metrics), for the certificate reloader of the node's TLS.
func (s *Server) EdgeMetrics() *metrics.Edge { return s.edge.Metrics }

// randomPrefix makes generated request ids unique across nodes and
// restarts; the counter after it makes them unique within the process.
func randomPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "kvr-" + hex.EncodeToString(b[:]) + "-"
}

// Handler returns the frontend's HTTP handler (all routes).
func (s *Server) Handler() http.Handler { return s.handler }

// routes builds the route table (oaiedge.NewMux adds the routed
// endpoints, /health, /ready and the OpenAI-shaped 404 and 405). The
// admin routes are served here too, unless Edge.AdminAddr keeps
// /metrics and /v1/route/explain on the admin listener alone.
func (s *Server) routes() http.Handler {
	own := append([]oaiedge.Route{
		{Pattern: "GET /v1/models", Handler: s.handleModels},
		{Pattern: "GET /v1/models/{id}", Handler: s.handleModel},
	}, s.controlRoutes()...)
	if s.cfg.Edge.AdminAddr == "" {
		own = append(own, s.observability()...)
	}
	own = append(own, s.cfg.Routes...)
	completion := s.completionHandler
	if s.cfg.NoProxy {
		completion = nil
	}
	return oaiedge.NewMux(s.errs, s.edge.Access, completion, s.ready, own...)
}

// adminRoutes builds the admin listener's route table.
func (s *Server) adminRoutes() http.Handler {
	return oaiedge.NewMux(s.errs, s.edge.Access, nil, s.ready, append(s.controlRoutes(), s.observability()...)...)
}

// controlRoutes are the admin routes that change or read the router's
// state, served on both listeners.
func (s *Server) controlRoutes() []oaiedge.Route {
	return []oaiedge.Route{
		{Pattern: "DELETE /v1/sessions/{id}", Handler: s.handleUnbind, Scope: oaiedge.ScopeAdmin},
		{Pattern: "GET /v1/sessions/{id}", Handler: s.handleSession, Scope: oaiedge.ScopeAdmin},
		{Pattern: "GET /busy_threshold", Handler: s.handleGetThresholds, Scope: oaiedge.ScopeAdmin},
		{Pattern: "POST /busy_threshold", Handler: s.handleSetThresholds, Scope: oaiedge.ScopeAdmin},
	}
}

// observability are the routes that may move to the admin listener.
func (s *Server) observability() []oaiedge.Route {
	own := []oaiedge.Route{{Pattern: "POST /v1/route/explain", Handler: s.handleExplain, Scope: oaiedge.ScopeAdmin}}
	if s.metrics != nil {
		own = append(own, oaiedge.Route{Pattern: "GET /metrics", Handler: s.metrics.Handler().ServeHTTP, Scope: oaiedge.ScopeAdmin})
	}
	return own
}

// Serve serves HTTP on ln until ctx ends, then stops accepting, marks the
// node not ready, waits up to ShutdownTimeout for in-flight requests and
// cancels those still running with ErrShuttingDown: a stream then ends
// with an error event, a request still waiting for its engine with a 503.
// It returns nil after a graceful stop. (BeginDrain marks the node not
// ready earlier, while it still accepts.)
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelRequests := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelRequests(nil)
	hs := s.httpServer(base, s.handler, ln)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.closeTransport()
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	err := s.shutdown(hs, cancelRequests)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	s.closeTransport()
	return err
}

// shutdown drains hs within ShutdownTimeout, then cancels the remaining
// requests (long streams) with ErrShuttingDown, gives their handlers
// cutGrace to write the error event or status that says so, and closes
// their connections.
func (s *Server) shutdown(hs *http.Server, cancelRequests context.CancelCauseFunc) error {
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err == nil {
		return nil
	}
	s.log.Warn("drain deadline passed; ending in-flight requests", "timeout", s.cfg.ShutdownTimeout)
	cancelRequests(ErrShuttingDown)
	gctx, gcancel := context.WithTimeout(context.Background(), cutGrace)
	defer gcancel()
	if hs.Shutdown(gctx) == nil {
		return nil
	}
	return hs.Close()
}

// cutGrace is how long the handlers of requests cut at the drain deadline
// get to write their last event: they only write a few hundred bytes, but
// a client that stopped reading must not hold the process.
const cutGrace = 2 * time.Second

// BeginDrain marks the server not ready (GET /ready answers 503) while it
// keeps serving: the node's drain calls it first, so that load balancers
// stop sending new requests before the listener closes. Serve marks it
// too when its context ends.
func (s *Server) BeginDrain() { s.draining.Store(true) }

// httpServer configures the edge timeouts. ReadHeaderTimeout is the
// slowloris defence for headers; bodies get a per-request read deadline
// (readBody) and responses per-write deadlines, so there is deliberately
// neither a ReadTimeout (it would also bound the connection's background
// read that detects client disconnects during a stream) nor a WriteTimeout
// (it would cut every long, healthy stream).
func (s *Server) httpServer(base context.Context, h http.Handler, ln net.Listener) *http.Server {
	return &http.Server{
		Handler:           h,
		ConnContext:       oaiedge.ConnContext(ln),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    oaiedge.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelError),
	}
}

// ServeAdmin serves the admin routes, /health and /ready on ln until ctx
// ends, then stops within ShutdownTimeout. Its requests are short reads,
// so there is no drain to wait for beyond that.
func (s *Server) ServeAdmin(ctx context.Context, ln net.Listener) error {
	hs := s.httpServer(ctx, s.admin, ln)
	hs.WriteTimeout = s.cfg.WriteTimeout
	return oaiedge.ServeUntil(ctx, hs, ln, s.cfg.ShutdownTimeout)
}

// closeTransport releases the engine connections the Server owns.
func (s *Server) closeTransport() {
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// requestID returns the client's X-Request-Id when usable, else a new id.
func (s *Server) requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= MaxRequestIDBytes {
		return id
	}
	if s.cfg.NewRequestID != nil {
		return s.cfg.NewRequestID()
	}
	return s.idPrefix + strconv.FormatUint(s.idSeq.Add(1), 36)
}
