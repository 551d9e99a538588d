package selection

import (
	"context"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"google.golang.org/grpc/status"
)

// GRPC returns the service's gRPC server, to register on a grpc.Server.
func (s *Service) GRPC() kvrpb.SelectionServer { return grpcServer{s: s} }

// grpcServer maps the service's methods to gRPC: errors become the code
// of their class in the edge's table.
type grpcServer struct {
	kvrpb.UnimplementedSelectionServer
	s *Service
}

var _ kvrpb.SelectionServer = grpcServer{}

func (g grpcServer) Select(ctx context.Context, in *kvrpb.SelectRequest) (*kvrpb.SelectResponse, error) {
	return answer(g.s, func() (*kvrpb.SelectResponse, error) { return g.s.selectOne(ctx, in) })
}

func (g grpcServer) SelectAndReserve(ctx context.Context, in *kvrpb.SelectRequest) (*kvrpb.SelectResponse, error) {
	return answer(g.s, func() (*kvrpb.SelectResponse, error) { return g.s.selectAndReserve(ctx, in) })
}

func (g grpcServer) Reserve(ctx context.Context, in *kvrpb.SelectReserveRequest) (*kvrpb.SelectResponse, error) {
	return answer(g.s, func() (*kvrpb.SelectResponse, error) { return g.s.reserve(ctx, in) })
}

func (g grpcServer) PrefillComplete(_ context.Context, in *kvrpb.SelectReservationRef) (*kvrpb.SelectReleaseResponse, error) {
	return answer(g.s, func() (*kvrpb.SelectReleaseResponse, error) { return g.s.prefillComplete(in) })
}

func (g grpcServer) Release(_ context.Context, in *kvrpb.SelectReleaseRequest) (*kvrpb.SelectReleaseResponse, error) {
	return answer(g.s, func() (*kvrpb.SelectReleaseResponse, error) { return g.s.release(in) })
}

// answer runs one call, counts it and maps its error.
func answer[T any](s *Service, call func() (T, error)) (T, error) {
	start := s.cfg.Now()
	out, err := call()
	c := s.errs.Classify(err)
	s.observe(metrics.EdgeSelectGRPC, start, c, err)
	if err != nil {
		var zero T
		// The code of err's class, with the message the HTTP mirror gives.
		return zero, status.Error(Code(c), oaiedge.ClientMessage(err))
	}
	return out, nil
}
