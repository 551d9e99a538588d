package frontend

import (
	"net/http"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// sessionView is the JSON answer of GET /v1/sessions/{id}.
type sessionView struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	DC       string `json:"dc,omitempty"`
	Engine   string `json:"engine"`
	EngineID uint64 `json:"engine_id"`
	Rank     uint32 `json:"rank"`
	// Version is the binding's version; in a router cluster it is the raft
	// index of the bind, a fencing token.
	Version      uint64 `json:"version"`
	Active       int    `json:"active_requests"`
	IdleDeadline string `json:"idle_deadline,omitempty"`
}

// handleSession answers where a session is bound: GET /v1/sessions/{id}.
// It is this node's applied state (a local read), 404 when unbound.
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := oaiedge.SessionIDParam(id); err != nil {
		s.errs.Write(w, err)
		return
	}
	sr, ok := s.router.(dispatch.SessionReader)
	if !ok {
		s.errs.Write(w, oaiedge.ErrNotFound)
		return
	}
	b, err := sr.Session(r.Context(), id)
	if err != nil {
		s.errs.Write(w, err)
		return
	}
	v := sessionView{ID: id, Object: "session", DC: s.cfg.DC, Engine: b.Worker.String(), EngineID: uint64(b.Worker.ID),
		Rank: b.Worker.Rank, Version: b.Version, Active: b.Active}
	if !b.IdleDeadline.IsZero() {
		v.IdleDeadline = b.IdleDeadline.UTC().Format(time.RFC3339Nano)
	}
	oaiedge.WriteOK(w, v)
}
