package selection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/frontend"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Router is what the service needs of the node's dispatcher.
type Router interface {
	Select(ctx context.Context, r *dispatch.Request) (*dispatch.Selection, error)
	Route(ctx context.Context, r *dispatch.Request) (*dispatch.Decision, error)
}

var _ Router = (*dispatch.Dispatcher)(nil)

// Service is the selection API: the gRPC service (GRPC) and the HTTP/JSON
// mirror (Routes) share its methods, its reservations and its table.
type Service struct {
	cfg    Config
	router Router
	reqs   *frontend.Requests
	errs   oaiedge.Table
	m      *metrics.Selection
	log    *slog.Logger
	res    *reservations
	sels   *selections
}

// New builds a Service deciding through r with requests built by reqs;
// m and log may be nil.
func New(cfg Config, r Router, reqs *frontend.Requests, m *metrics.Metrics, log *slog.Logger) (*Service, error) {
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
	s := &Service{cfg: cfg, router: r, reqs: reqs, errs: errorTable(cfg.OverloadStatus), log: log,
		sels: newSelections(cfg.SelectionTTL, cfg.MaxSelections, cfg.MaxSelectionBytes)}
	if m != nil {
		s.m = metrics.NewSelection(m.Registerer())
	}
	s.res = &reservations{ttl: cfg.ReservationTTL, max: cfg.MaxReservations, m: s.m, byID: make(map[string]*reservation)}
	return s, nil
}

// Close frees every outstanding reservation and refuses new ones; the
// node calls it once its listeners have stopped.
func (s *Service) Close() { s.res.close() }

// Reservations is the number of outstanding reservations.
func (s *Service) Reservations() int { return s.res.len() }

// selectOne is Select: the decision, kept for Reserve, with its costs.
func (s *Service) selectOne(ctx context.Context, in *kvrpb.SelectRequest) (*kvrpb.SelectResponse, error) {
	r, l, err := s.begin(in)
	if err != nil {
		return nil, err
	}
	defer l.end()
	sel, err := s.router.Select(ctx, r)
	if err != nil {
		return nil, err
	}
	out := selectionResponse(r.ID, sel)
	out.SelectionId = s.sels.put(r, chosen(sel), l.lent(), s.cfg.Now())
	out.SelectionTtlMs = uint64(s.cfg.SelectionTTL / time.Millisecond)
	return out, nil
}

// selectAndReserve is SelectAndReserve: Route, which books the load, and
// a reservation that holds the Decision.
func (s *Service) selectAndReserve(ctx context.Context, in *kvrpb.SelectRequest) (*kvrpb.SelectResponse, error) {
	r, l, err := s.begin(in)
	if err != nil {
		return nil, err
	}
	defer l.end()
	return s.reserveRequest(ctx, r)
}

// reserve is Reserve: the kept selection's request, pinned to the engine
// it chose, booked by Route.
func (s *Service) reserve(ctx context.Context, in *kvrpb.SelectReserveRequest) (*kvrpb.SelectResponse, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	e, ok := s.sels.take(in.GetSelectionId(), s.cfg.Now())
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrSelectionNotFound, in.GetSelectionId())
	}
	r := e.req
	r.Pin, r.PrefillPin, r.Arrival = &e.worker, e.prefill, s.cfg.Now()
	return s.reserveRequest(ctx, &r)
}

// chosen are the engines sel chose: a Reserve pins them, the decode
// engine and the prefill engine of a pair alike.
func chosen(sel *dispatch.Selection) pins {
	p := pins{worker: dispatch.Pin{Engine: sel.Worker.ID, Rank: sel.Worker.Rank}}
	if sp := sel.Prefill; sp != nil {
		p.prefill = &dispatch.Pin{Engine: sp.Worker.ID, Rank: sp.Worker.Rank}
	}
	return p
}

// reserveRequest routes r and keeps its Decision as a reservation.
func (s *Service) reserveRequest(ctx context.Context, r *dispatch.Request) (*kvrpb.SelectResponse, error) {
	dec, err := s.router.Route(ctx, r)
	if err != nil {
		return nil, err
	}
	out := decisionResponse(r.ID, dec)
	if out.ReservationId, err = s.res.add(dec); err != nil {
		return nil, err
	}
	out.ReservationTtlMs = uint64(s.cfg.ReservationTTL / time.Millisecond)
	return out, nil
}

// prefillComplete is PrefillComplete.
func (s *Service) prefillComplete(in *kvrpb.SelectReservationRef) (*kvrpb.SelectReleaseResponse, error) {
	if err := s.res.prefillComplete(in.GetReservationId()); err != nil {
		return nil, err
	}
	return &kvrpb.SelectReleaseResponse{Found: true}, nil
}

// release is Release; it is idempotent.
func (s *Service) release(in *kvrpb.SelectReleaseRequest) (*kvrpb.SelectReleaseResponse, error) {
	found := s.res.release(in.GetReservationId(), outcomeError(in.GetOutcome()))
	return &kvrpb.SelectReleaseResponse{Found: found}, nil
}

// begin checks readiness and builds the routing request of in.
func (s *Service) begin(in *kvrpb.SelectRequest) (*dispatch.Request, lease, error) {
	if err := s.serving(); err != nil {
		return nil, lease{}, err
	}
	id, err := s.requestID(in)
	if err != nil {
		return nil, lease{}, err
	}
	return s.request(in, id)
}

// serving refuses calls while the node does not serve.
func (s *Service) serving() error {
	if f := s.cfg.Serving; f != nil && !f() {
		return oaiedge.ErrNotReady
	}
	return nil
}

// errReleasedFailed is the Decision's end of a request released as failed.
var errReleasedFailed = fmt.Errorf("selection: released as failed by the caller")

// outcomeError is the Decision.Done error of a released outcome.
func outcomeError(o kvrpb.SelectOutcome) error {
	switch o {
	case kvrpb.SelectOutcome_SELECT_OUTCOME_FAILED:
		return errReleasedFailed
	case kvrpb.SelectOutcome_SELECT_OUTCOME_UNREACHABLE:
		return fmt.Errorf("selection: released by the caller: %w", dispatch.ErrEngineUnreachable)
	case kvrpb.SelectOutcome_SELECT_OUTCOME_PREFILL_UNREACHABLE:
		return errPrefillUnreachable
	}
	return nil
}

// errPrefillUnreachable ends a pair whose prefill hop could not reach its
// engine: the request failed, on the decode engine's side for no fault
// of its own (reservation.end marks the prefill engine).
var errPrefillUnreachable = errors.New("selection: released by the caller: the prefill engine was unreachable")

// observe counts one call of edge and records its answer time.
func (s *Service) observe(edge string, start time.Time, c oaiedge.Class, err error) {
	if s.m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = Outcome(c.Status)
	}
	s.m.Requests.WithLabelValues(edge, outcome).Inc()
	s.m.Decision.WithLabelValues(edge).Observe(s.cfg.Now().Sub(start).Seconds())
}

// Outcome is the requests counter's outcome of an error status, as the
// frontend counts its own.
func Outcome(status int) string {
	switch {
	case status == frontend.StatusClientClosed:
		return "canceled"
	case status < 500:
		return "client_error"
	}
	return "server_error"
}

// selectionResponse is the answer of a Select.
func selectionResponse(id string, s *dispatch.Selection) *kvrpb.SelectResponse {
	out := &kvrpb.SelectResponse{RequestId: id, Worker: worker(s.Worker, s.EndpointURL),
		BlockSize: uint32(s.BlockSize), Blocks: uint32(s.Blocks), CachedBlocks: uint32(s.CachedBlocks),
		SessionBound: s.SessionBound, Reason: s.Reason}
	out.Candidates = make([]*kvrpb.SelectCandidate, len(s.Candidates))
	for i, c := range s.Candidates {
		sc := &kvrpb.SelectCandidate{EngineId: uint64(c.Worker.ID), DpRank: c.Worker.Rank,
			DeviceBlocks: c.Overlap.Device, HostBlocks: c.Overlap.Host, DiskBlocks: c.Overlap.Disk,
			Potential: load(c.Load), Active: load(c.Active), Eligible: c.Eligible, Chosen: c.Worker == s.Worker}
		if c.Costed {
			sc.Cost = &c.Cost
		}
		out.Candidates[i] = sc
	}
	if p := s.Prefill; p != nil {
		out.PrefillWorker = prefillWorker(p.Worker, p.EndpointURL, p.BootstrapPort, p.DPSize)
	}
	return out
}

// decisionResponse is the answer of a reservation.
func decisionResponse(id string, d *dispatch.Decision) *kvrpb.SelectResponse {
	out := &kvrpb.SelectResponse{RequestId: id, Worker: worker(d.Worker, d.EndpointURL),
		Blocks: uint32(d.Blocks), CachedBlocks: uint32(d.CachedBlocks), SessionBound: d.SessionBound}
	if p := d.Prefill; p != nil {
		out.PrefillWorker = prefillWorker(p.Worker, p.EndpointURL, p.BootstrapPort, p.DPSize)
	}
	return out
}

// prefillWorker is a pair's prefill engine, with what its hand-off needs.
func prefillWorker(w routing.Worker, baseURL string, bootstrapPort, dpSize uint32) *kvrpb.SelectWorker {
	out := worker(w, baseURL)
	out.BootstrapPort, out.DpSize = bootstrapPort, dpSize
	return out
}

func worker(w routing.Worker, baseURL string) *kvrpb.SelectWorker {
	hp, _ := dispatch.HostPort(baseURL)
	return &kvrpb.SelectWorker{EngineId: uint64(w.ID), DpRank: w.Rank, Endpoint: hp, Url: baseURL}
}

func load(l routing.Load) *kvrpb.SelectLoad {
	return &kvrpb.SelectLoad{PrefillTokens: l.PrefillTokens, DecodeBlocks: l.DecodeBlocks, ActiveRequests: l.ActiveRequests}
}
