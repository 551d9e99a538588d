package frontend

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// handleModels lists the router's models in the OpenAI list shape, sorted
// by id so that the answer is stable.
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	models := s.router.Models()
	list := modelList{Object: "list", Data: make([]modelObject, 0, len(models))}
	for _, m := range models {
		list.Data = append(list.Data, modelObject{ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "kvrouter"})
	}
	sort.Slice(list.Data, func(i, j int) bool { return list.Data[i].ID < list.Data[j].ID })
	oaiedge.WriteOK(w, list)
}

// handleModel answers one model in the OpenAI shape, GET
// /v1/models/{id}, when a live engine serves it: the router's view,
// since that is which model a request would be routed to, and engines
// (vLLM among them) need not serve the route themselves.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, m := range s.router.Models() {
		if m.ID == id {
			oaiedge.WriteOK(w, modelObject{ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "kvrouter"})
			return
		}
	}
	s.errs.Write(w, fmt.Errorf("%w: %q", dispatch.ErrModelNotFound, id))
}

// handleUnbind ends a session's binding: DELETE /v1/sessions/{id}.
func (s *Server) handleUnbind(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := oaiedge.SessionIDParam(id); err != nil {
		s.errs.Write(w, err)
		return
	}
	if err := s.router.Unbind(r.Context(), id); err != nil {
		s.errs.Write(w, err)
		return
	}
	s.log.Info("session unbound", "session", id)
	w.WriteHeader(http.StatusNoContent)
}

// ready is readiness for GET /ready: Config.Ready (default: at least one
// model is served), and not draining.
func (s *Server) ready() bool {
	if s.draining.Load() {
		return false
	}
	if s.cfg.Ready != nil {
		return s.cfg.Ready()
	}
	return len(s.router.Models()) > 0
}
