package extproc

import (
	"context"
	"fmt"
	"log/slog"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// Router is what the picker needs of the node's dispatcher.
type Router interface {
	Route(ctx context.Context, r *dispatch.Request) (*dispatch.Decision, error)
}

// Server is the endpoint picker. Register it on a grpc.Server.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	cfg    Config
	router Router
	reqs   *frontend.Requests
	errs   oaiedge.Table
	m      *metrics.Selection
	log    *slog.Logger
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// New builds a picker deciding through r with requests built by reqs; m
// and log may be nil.
func New(cfg Config, r Router, reqs *frontend.Requests, m *metrics.Metrics, log *slog.Logger) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil || reqs == nil {
		return nil, fmt.Errorf("%w: a router and a request builder are required", ErrConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, router: r, reqs: reqs, errs: errorTable(cfg.OverloadStatus), log: log}
	if m != nil {
		s.m = metrics.NewSelection(m.Registerer())
	}
	return s, nil
}

// Register registers the picker and its health service on g.
func (s *Server) Register(g *grpc.Server) {
	extprocv3.RegisterExternalProcessorServer(g, s)
	healthpb.RegisterHealthServer(g, health{s: s})
}

// Process implements the ext_proc service: one HTTP request per stream.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	x := &exchange{s: s, stream: stream}
	err := x.run()
	x.end(err)
	return err
}

// serving reports whether the node serves requests.
func (s *Server) serving() bool { return s.cfg.Serving == nil || s.cfg.Serving() }

// observe counts one request's outcome.
func (s *Server) observe(outcome string) {
	if s.m != nil {
		s.m.Requests.WithLabelValues(metrics.EdgeExtProc, outcome).Inc()
	}
}

// health answers the gRPC health protocol as the extension's picker
// does: liveness always, readiness and the ext_proc service while the
// node serves.
type health struct {
	healthpb.UnimplementedHealthServer
	s *Server
}

func (h health) Check(_ context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st := healthpb.HealthCheckResponse_SERVING
	switch in.GetService() {
	case "", "liveness":
	case "readiness", extprocv3.ExternalProcessor_ServiceDesc.ServiceName:
		if !h.s.serving() {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
	default:
		return nil, status.Errorf(codes.NotFound, "unknown service %q", in.GetService())
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}
