package server

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// vllm reports whether the server speaks the vLLM wire.
func (s *Server) vllm() bool { return s.cfg.Protocol == ProtocolVLLM }

// openVLLM binds every rank's publisher and opens the ranks to requests.
func (s *Server) openVLLM() error {
	for i, r := range s.ranks {
		if err := r.vpub.open(); err != nil {
			for _, prev := range s.ranks[:i] {
				prev.vpub.close()
			}
			return err
		}
	}
	for _, r := range s.ranks {
		r.setOpen(true)
	}
	pub, replay := s.ranks[0].vpub.endpoints()
	s.log.Info("mocker started", "ranks", len(s.ranks), "endpoint", s.cfg.EndpointURL, "model", s.cfg.Engine.Model,
		"kv_events", pub, "replay", replay, "protocol", ProtocolVLLM)
	return nil
}

func (s *Server) closeVLLM() {
	for _, r := range s.ranks {
		r.vpub.close()
	}
}

// publishVLLM encodes one Advance's events as one KVEventBatch and
// publishes it. The caller holds r.mu.
func (s *Server) publishVLLM(r *rank, events []routing.Event) {
	ts := float64(s.cfg.Clock().UnixNano()) / 1e9
	payload, err := r.venc.batch(ts, events, r.book)
	if err != nil {
		s.log.Error("encode vllm event batch", "worker", r.worker.String(), "err", err)
		if payload == nil {
			return
		}
	}
	drop := false
	if r.drop.Load() > 0 {
		r.drop.Add(-1)
		drop = true
		s.log.Info("dropping event batch", "worker", r.worker.String(), "first", events[0].ID)
	}
	r.vpub.publish(payload, drop)
}

// KVEventsEndpoints returns rank's bound event and replay endpoints in
// the vLLM-wire mode (replay empty when there is none), as a router's
// engine declaration names them.
func (s *Server) KVEventsEndpoints(rank uint32) (pub, replay string, err error) {
	if !s.vllm() || int(rank) >= len(s.ranks) {
		return "", "", fmt.Errorf("%w: no vllm publisher for rank %d", ErrConfig, rank)
	}
	pub, replay = s.ranks[rank].vpub.endpoints()
	return pub, replay, nil
}

// ClosePublisher closes rank's vLLM-wire sockets: until OpenPublisher
// binds them again on the same addresses, batches are numbered and kept
// for replay but reach nobody, as a publisher that lost its subscribers
// would look. It is a test hook.
func (s *Server) ClosePublisher(rank uint32) error {
	p, err := s.vllmPublisher(rank)
	if err != nil {
		return err
	}
	p.close()
	return nil
}

// OpenPublisher binds rank's vLLM-wire sockets again after
// ClosePublisher. It is a test hook.
func (s *Server) OpenPublisher(rank uint32) error {
	p, err := s.vllmPublisher(rank)
	if err != nil {
		return err
	}
	return p.open()
}

// vllmPublisher is rank's vLLM-wire publisher.
func (s *Server) vllmPublisher(rank uint32) (*vllmPub, error) {
	if !s.vllm() || int(rank) >= len(s.ranks) {
		return nil, fmt.Errorf("%w: no vllm publisher for rank %d", ErrConfig, rank)
	}
	return s.ranks[rank].vpub, nil
}

// InterceptReplays has rank's replay socket call fn with the first
// sequence number of each request before answering it, from the socket's
// one serving goroutine: fn may block (a slow replay socket, or one that
// answers only after more batches were published) and returns false to
// leave the request unanswered (a silent one). A nil fn answers every
// request again. fn must return before the server stops. It is a test
// hook.
func (s *Server) InterceptReplays(rank uint32, fn func(from uint64) bool) error {
	if !s.vllm() || int(rank) >= len(s.ranks) {
		return fmt.Errorf("%w: no vllm publisher for rank %d", ErrConfig, rank)
	}
	p := s.ranks[rank].vpub
	if fn == nil {
		p.intercept.Store(nil)
		return nil
	}
	p.intercept.Store(&fn)
	return nil
}

// Dump returns rank's cache as the engine's Dump: the ground truth that a
// subscriber's index is compared with in tests.
func (s *Server) Dump(rank uint32) ([]routing.Event, error) {
	if int(rank) >= len(s.ranks) {
		return nil, fmt.Errorf("%w: rank %d", ErrConfig, rank)
	}
	r := s.ranks[rank]
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eng.Dump().Events, nil
}
