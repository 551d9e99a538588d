package oaiedge

import (
	"net/http"
	"strings"
)

// Route is one of an edge's own routes: a net/http ServeMux pattern with
// a method ("GET /v1/models") and its handler.
type Route struct {
	Pattern string
	Handler http.HandlerFunc
}

// NewMux is an edge's route table: POST of both completion endpoints to
// completion, GET /health (liveness: the process serves HTTP), GET /ready
// (ready, else ErrNotReady), then the edge's own routes. Any other
// request is refused in the OpenAI shape rather than the mux's plain
// text: 405 (ErrMethodNotAllowed) when some route serves its path with
// another method, else 404 (ErrNotFound).
func NewMux(t Table, completion func(Endpoint) http.HandlerFunc, ready func() bool, own ...Route) http.Handler {
	routes := append([]Route{
		{"POST " + Chat.Path(), completion(Chat)},
		{"POST " + Completions.Path(), completion(Completions)},
		{"GET /health", func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
		}},
		{"GET /ready", func(w http.ResponseWriter, _ *http.Request) {
			if !ready() {
				t.Write(w, ErrNotReady)
				return
			}
			WriteJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
		}},
	}, own...)
	// paths matches the routes' paths whatever the method, to tell 405
	// from 404.
	mux, paths, seen := http.NewServeMux(), http.NewServeMux(), map[string]bool{}
	for _, r := range routes {
		mux.HandleFunc(r.Pattern, r.Handler)
		if _, path, _ := strings.Cut(r.Pattern, " "); !seen[path] {
			seen[path] = true
			paths.HandleFunc(path, http.NotFound)
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := paths.Handler(r); pattern != "" {
			t.Write(w, ErrMethodNotAllowed)
			return
		}
		t.Write(w, ErrNotFound)
	})
	return mux
}
