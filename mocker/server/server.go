package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// ErrStarted is returned by Run or Serve on a server that has already run.
var ErrStarted = errors.New("mocker server: already started")

// shutdownGrace bounds how long Serve waits for HTTP handlers to finish
// after its context ends; requests in flight are aborted at once, so only
// slow clients can hold it up.
const shutdownGrace = 5 * time.Second

// Server is one simulated engine process: DPSize simulated ranks behind an
// OpenAI-compatible HTTP handler, publishing on the NATS event plane.
type Server struct {
	cfg         Config
	nc          *nats.Conn
	log         *slog.Logger
	incarnation uint64
	ranks       []*rank
	card        atomic.Pointer[kvrpb.WorkerCard]

	started  atomic.Bool
	hbPaused atomic.Bool
	reqSeq   atomic.Uint64

	// prefixQueried and prefixHit count prompt tokens looked up in the
	// prefix cache and found there, for vLLM's prefix_cache metrics.
	prefixQueried, prefixHit atomic.Uint64

	// rooms are a prefill engine's SGLang bootstrap rooms, bootClient the
	// client a decode engine asks bootstrap servers with, and blockSeq
	// numbers the block ids a vLLM prefill engine hands off
	// (handoff.go, bootstrap.go).
	rooms      *rooms
	bootClient *http.Client
	blockSeq   atomic.Uint64
}

// New builds a server from cfg (completed with defaults and validated) that
// publishes on nc, which may be nil with ProtocolVLLM (it is not used
// then). Nothing runs until Run or Serve.
func New(cfg Config, nc *nats.Conn, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if nc == nil && cfg.Protocol != ProtocolVLLM {
		return nil, fmt.Errorf("%w: nil NATS connection", ErrConfig)
	}
	s := &Server{cfg: cfg, nc: nc, incarnation: cfg.Rand.Uint64() | 1,
		log:   log.With("dc", cfg.DC, "worker", strconv.FormatUint(cfg.EngineID, 10)),
		rooms: &rooms{ttl: cfg.BootstrapTimeout, clock: cfg.Clock, m: make(map[uint64]*room)},
		// Bootstrap servers are the prefill engines of the deployment:
		// reached directly, never through a proxy.
		bootClient: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}}
	for i := range cfg.DPSize {
		r, err := newRank(s, uint32(i))
		if err != nil {
			return nil, err
		}
		s.ranks = append(s.ranks, r)
	}
	return s, nil
}

// EngineID is the engine's id on the event plane.
func (s *Server) EngineID() uint64 { return s.cfg.EngineID }

// Incarnation is this start's random incarnation number.
func (s *Server) Incarnation() uint64 { return s.incarnation }

// Config returns the effective configuration.
func (s *Server) Config() Config { return s.cfg }

// Card returns a copy of the published card, or nil before Run.
func (s *Server) Card() *kvrpb.WorkerCard {
	c := s.card.Load()
	if c == nil {
		return nil
	}
	return proto.CloneOf(c)
}

// DropBatches makes rank drop its next n event batches (one batch is the
// events of one engine step) instead of publishing them, so that a
// subscriber sees a gap in the event ids. It is a test hook.
func (s *Server) DropBatches(rank uint32, n int) error {
	if int(rank) >= len(s.ranks) || n < 0 {
		return fmt.Errorf("%w: rank %d of %d, count %d", ErrConfig, rank, len(s.ranks), n)
	}
	s.ranks[rank].drop.Add(int64(n))
	return nil
}

// PauseHeartbeats stops (true) or resumes (false) heartbeat publication,
// simulating an engine that hangs while its event stream is idle. It is a
// test hook.
func (s *Server) PauseHeartbeats(paused bool) { s.hbPaused.Store(paused) }

// Run starts the engine: it answers snapshot requests, publishes the card
// and heartbeats, and drives every rank in real time until ctx is done. It
// then aborts requests in flight, publishes Deregister and returns. The
// advertised endpoint must be known: set Config.EndpointURL or use Serve.
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	subs, err := s.open()
	if err != nil {
		return err
	}
	s.loop(ctx, subs)
	return nil
}

// open builds the card, answers snapshot requests, opens the ranks to
// requests and publishes the card: after it the engine is reachable.
func (s *Server) open() ([]*nats.Subscription, error) {
	if s.cfg.EndpointURL == "" {
		return nil, fmt.Errorf("%w: endpoint_url must be set when not serving a listener", ErrConfig)
	}
	s.card.Store(s.buildCard())
	if s.vllm() {
		return nil, s.openVLLM()
	}
	subs, err := s.subscribe()
	if err != nil {
		return nil, err
	}
	for _, r := range s.ranks {
		r.setOpen(true)
	}
	s.publishCard()
	s.log.Info("mocker started", "ranks", len(s.ranks), "endpoint", s.cfg.EndpointURL, "model", s.cfg.Engine.Model)
	return subs, nil
}

// loop drives the ranks and the periodic publications until ctx is done,
// then closes the ranks, stops answering snapshots and deregisters.
func (s *Server) loop(ctx context.Context, subs []*nats.Subscription) {
	var wg sync.WaitGroup
	for _, r := range s.ranks {
		wg.Go(func() { r.run(ctx) })
	}
	if !s.vllm() {
		wg.Go(func() { every(ctx, s.cfg.HeartbeatInterval, s.publishHeartbeat) })
		wg.Go(func() { every(ctx, s.cfg.CardInterval, s.publishCard) })
	}
	wg.Wait()
	for _, r := range s.ranks {
		r.setOpen(false)
	}
	if s.vllm() {
		for _, r := range s.ranks {
			r.vpub.close()
		}
	} else {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		s.publishDeregister()
	}
	s.log.Info("mocker stopped")
}

// subscribe answers each rank's snapshot subject. On an error it leaves
// nothing subscribed.
func (s *Server) subscribe() ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	fail := func(err error) ([]*nats.Subscription, error) {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		return nil, err
	}
	for _, r := range s.ranks {
		subject := kvrpb.SubjectSnapshot(s.cfg.DC, s.cfg.EngineID, r.worker.Rank)
		sub, err := s.nc.Subscribe(subject, func(m *nats.Msg) { s.answerSnapshot(r, m.Data, m.Respond) })
		if err != nil {
			return fail(fmt.Errorf("subscribe %s: %w", subject, err))
		}
		subs = append(subs, sub)
	}
	// A router that starts asks for cards; answering at once lets it
	// serve without waiting a card interval.
	sub, err := s.nc.Subscribe(kvrpb.SubjectDiscover(s.cfg.DC), func(*nats.Msg) { s.publishCard() })
	if err != nil {
		return fail(fmt.Errorf("subscribe %s: %w", kvrpb.SubjectDiscover(s.cfg.DC), err))
	}
	subs = append(subs, sub)
	// Flush makes the subscriptions effective at the NATS server before
	// the engine announces itself, so a router's first request is heard.
	if err := s.nc.Flush(); err != nil {
		return fail(fmt.Errorf("subscribe snapshots: %w", err))
	}
	return subs, nil
}

// every calls f each interval until ctx is done.
func every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// Serve runs the engine and serves its HTTP API on ln until ctx is done,
// then shuts both down (Deregister included) and closes ln. When
// Config.EndpointURL is empty it is derived from ln's address.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	if s.cfg.EndpointURL == "" {
		s.cfg.EndpointURL = endpointFor(ln.Addr())
	}
	hs := &http.Server{
		Handler: s.Handler(),
		// ReadHeaderTimeout defends against slow-header clients; there is no
		// write timeout because streams last as long as generation does.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	bl, err := s.listenBootstrap(ln)
	if err != nil {
		_ = ln.Close()
		return err
	}
	subs, err := s.open()
	if err != nil {
		_ = ln.Close()
		if bl != nil {
			_ = bl.Close()
		}
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.bootClient.CloseIdleConnections()
	var wg sync.WaitGroup
	var httpErr error
	wg.Go(func() { s.loop(ctx, subs) })
	if bl != nil {
		wg.Go(func() { s.serveBootstrap(ctx, bl) })
	}
	wg.Go(func() {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			httpErr = fmt.Errorf("serve http: %w", err)
		}
		cancel()
	})
	<-ctx.Done()
	shutCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	if err := hs.Shutdown(shutCtx); err != nil {
		_ = hs.Close()
	}
	stop()
	wg.Wait()
	return httpErr
}

// endpointFor derives the advertised base URL from a listener address. An
// unspecified host (":8000", "0.0.0.0") is advertised as loopback, which
// suits single-host tests; deployments set EndpointURL.
func endpointFor(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
