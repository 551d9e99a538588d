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
	"sync"
	"sync/atomic"

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
	log       *slog.Logger
	tracer    trace.Tracer
	client    *http.Client
	// transport is set when the Server built its own engine client, which
	// it then closes when Serve returns.
	transport *http.Transport
	// errs is the error table, with Config.OverloadStatus.
	errs oaiedge.Table
	// bodies reads request bodies under the configured limits.
	bodies   oaiedge.BodyReader
	handler  http.Handler
	draining atomic.Bool
	idPrefix string
	idSeq    atomic.Uint64
	// engineAuth is the Authorization value sent to engines, built once
	// from Config.EngineAPIKey ("" without a key).
	engineAuth string
	// approximated holds the models already logged as routed by text
	// blocks for want of a tokenizer (exactTokens).
	approximated sync.Map
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
	if cfg.EngineAPIKey != "" {
		s.engineAuth = "Bearer " + cfg.EngineAPIKey
	}
	rt := cfg.Transport
	if rt == nil {
		s.transport = newTransport(cfg)
		rt = s.transport
	}
	s.client = &http.Client{Transport: rt, CheckRedirect: noRedirects}
	s.idPrefix = randomPrefix()
	s.handler = s.withTracing(s.routes())
	return s, nil
}

// noRedirects stops the client from following engine redirects: an engine
// answering with one is misconfigured, and the body must not be replayed
// elsewhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// randomPrefix makes generated request ids unique across nodes and
// restarts; the counter after it makes them unique within the process.
func randomPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "kvr-" + hex.EncodeToString(b[:]) + "-"
}

// Handler returns the frontend's HTTP handler (all routes).
func (s *Server) Handler() http.Handler { return s.handler }

// routes builds the route table (oaiedge.NewMux adds the completion
// endpoints, /health, /ready and the OpenAI-shaped 404 and 405).
func (s *Server) routes() http.Handler {
	own := []oaiedge.Route{
		{Pattern: "GET /v1/models", Handler: s.handleModels},
		{Pattern: "DELETE /v1/sessions/{id}", Handler: s.handleUnbind},
		{Pattern: "GET /v1/sessions/{id}", Handler: s.handleSession},
		{Pattern: "POST /v1/route/explain", Handler: s.handleExplain},
	}
	if s.metrics != nil {
		own = append(own, oaiedge.Route{Pattern: "GET /metrics", Handler: s.metrics.Handler().ServeHTTP})
	}
	return oaiedge.NewMux(s.errs, s.completionHandler, s.ready, own...)
}

// Serve serves HTTP on ln until ctx ends, then stops accepting, marks the
// node not ready, waits up to ShutdownTimeout for in-flight requests and
// cancels those still running. It returns nil after a graceful stop.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	hs := s.httpServer(base)
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
// requests (long streams) and closes their connections.
func (s *Server) shutdown(hs *http.Server, cancelRequests context.CancelFunc) error {
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		cancelRequests()
		s.log.Warn("frontend shutdown deadline passed; cancelling in-flight requests", "err", err)
		return hs.Close()
	}
	return nil
}

// httpServer configures the edge timeouts. ReadHeaderTimeout is the
// slowloris defence for headers; bodies get a per-request read deadline
// (readBody) and responses per-write deadlines, so there is deliberately
// neither a ReadTimeout (it would also bound the connection's background
// read that detects client disconnects during a stream) nor a WriteTimeout
// (it would cut every long, healthy stream).
func (s *Server) httpServer(base context.Context) *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    oaiedge.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
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
