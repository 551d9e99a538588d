package frontend

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
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
	body, _ := json.Marshal(list)
	writeJSON(w, http.StatusOK, body)
}

// handleUnbind ends a session's binding: DELETE /v1/sessions/{id}.
func (s *Server) handleUnbind(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" || len(id) > MaxSessionIDBytes {
		s.writeError(w, badParam("id", "session id must be 1 to %d bytes", MaxSessionIDBytes))
		return
	}
	if err := s.router.Unbind(r.Context(), id); err != nil {
		s.writeError(w, err)
		return
	}
	s.log.Info("session unbound", "session", id)
	w.WriteHeader(http.StatusNoContent)
}

// handleHealth is liveness: the process serves HTTP.
func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

// handleReady is readiness: Config.Ready (default: at least one model is
// served), and not draining.
func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() || !s.ready() {
		s.writeError(w, ErrNotReady)
		return
	}
	writeJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
}

func (s *Server) ready() bool {
	if s.cfg.Ready != nil {
		return s.cfg.Ready()
	}
	return len(s.router.Models()) > 0
}

// knownPaths are the routes, for telling 405 from 404.
var knownPaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/ready", "/metrics"}

// handleUnknown answers requests no route matched, in the OpenAI error
// shape rather than the mux's plain text.
func (s *Server) handleUnknown(w http.ResponseWriter, r *http.Request) {
	for _, p := range knownPaths {
		if r.URL.Path == p {
			s.writeError(w, ErrMethodNotAllowed)
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, "/v1/sessions/") {
		s.writeError(w, ErrMethodNotAllowed)
		return
	}
	s.writeError(w, ErrNotFound)
}

// writeError answers with err's class from the error table.
func (s *Server) writeError(w http.ResponseWriter, err error) int {
	c := classify(err, s.cfg.OverloadStatus)
	writeJSON(w, c.status, errorJSON(err, c))
	return c.status
}
