package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// SGLang's bootstrap, simulated. A prefill engine with a BootstrapPort
// serves GET /kv/{room} on that port: it answers 200 once the room's
// prefill has finished, 410 when it failed, and 504 when it did not end
// within BootstrapTimeout. A decode engine given the room asks it before
// it takes the request, which is how SGLang's decode engine waits for the
// cache it fetches through the bootstrap server. Since either hop may
// arrive first, a room exists from its first mention by either, and is
// forgotten BootstrapTimeout after that.

// room is one bootstrap room's state.
type room struct {
	created time.Time
	done    chan struct{} // closed when the prefill ended
	ok      bool          // set before done closes
	ended   bool
}

// rooms are a prefill engine's bootstrap rooms.
type rooms struct {
	ttl   time.Duration
	clock Clock
	mu    sync.Mutex
	m     map[uint64]*room
}

// get returns room id, creating it, and forgets the expired ones.
func (rs *rooms) get(id uint64) *room {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := rs.clock()
	for k, r := range rs.m {
		if now.Sub(r.created) > rs.ttl {
			delete(rs.m, k)
		}
	}
	r := rs.m[id]
	if r == nil {
		r = &room{created: now, done: make(chan struct{})}
		rs.m[id] = r
	}
	return r
}

// end records the end of room id's prefill.
func (rs *rooms) end(id uint64, ok bool) {
	r := rs.get(id)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !r.ended {
		r.ended, r.ok = true, ok
		close(r.done)
	}
}

// bootstrapHandler serves the rooms.
func (s *Server) bootstrapHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{room}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("room"), 10, 63)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_room", "room must be an integer in 0..2^63-1")
			return
		}
		rm := s.rooms.get(id)
		timer := time.NewTimer(s.cfg.BootstrapTimeout)
		defer timer.Stop()
		select {
		case <-rm.done:
		case <-timer.C:
			writeError(w, http.StatusGatewayTimeout, "server_error", "bootstrap_timeout", fmt.Sprintf("room %d: no prefill within %v", id, s.cfg.BootstrapTimeout))
			return
		case <-r.Context().Done():
			return
		}
		if !rm.ok {
			writeError(w, http.StatusGone, "server_error", "prefill_failed", fmt.Sprintf("room %d: the prefill failed", id))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"room": id})
	})
	return mux
}

// listenBootstrap opens the bootstrap server's listener of a prefill
// engine with a BootstrapPort, on that port of ln's host; nil without one.
func (s *Server) listenBootstrap(ln net.Listener) (net.Listener, error) {
	if s.cfg.BootstrapPort == 0 {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return nil, err
	}
	bl, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(s.cfg.BootstrapPort)))
	if err != nil {
		return nil, fmt.Errorf("%w: bootstrap_port: %w", ErrConfig, err)
	}
	return bl, nil
}

// serveBootstrap serves the bootstrap server on bl until ctx ends and
// returns once it is down, its waiting requests ended.
func (s *Server) serveBootstrap(ctx context.Context, bl net.Listener) {
	hs := &http.Server{Handler: s.bootstrapHandler(), ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { _ = hs.Close() })
	defer stop()
	if err := hs.Serve(bl); !errors.Is(err, http.ErrServerClosed) {
		s.log.Warn("bootstrap server stopped", "err", err)
	}
}

// awaitRoom asks the prefill engine's bootstrap server for h's room, as a
// decode engine does before it takes an SGLang hop; an error says why the
// cache will not come.
func (s *Server) awaitRoom(ctx context.Context, h handoff) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BootstrapTimeout)
	defer cancel()
	u := "http://" + net.JoinHostPort(h.host, strconv.Itoa(h.port)) + "/kv/" + strconv.FormatUint(h.room, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := s.bootClient.Do(req)
	if err != nil {
		return fmt.Errorf("bootstrap server %s:%d: %w", h.host, h.port, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bootstrap server %s:%d: room %d: status %d: %s", h.host, h.port, h.room, resp.StatusCode, msg)
	}
	return nil
}
