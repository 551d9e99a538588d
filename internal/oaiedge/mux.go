package oaiedge

import (
	"net/http"
	"strings"
)

// Route is one of an edge's own routes: a net/http ServeMux pattern with
// a method ("GET /v1/models"), its handler and who may call it.
type Route struct {
	Pattern string
	Handler http.HandlerFunc
	// Scope is ScopeAPI (clients) unless set.
	Scope Scope
}

// NewMux is an edge's route table: POST of every Endpoint to completion
// (none when completion is nil: an admin listener),
// GET /health (liveness: the process serves HTTP), GET /ready (ready,
// else ErrNotReady), then the edge's own routes. Each route but the two
// probes is guarded by a for its scope (nil: no access control). Any
// other request is refused in the OpenAI shape rather than the mux's
// plain text: 405 (ErrMethodNotAllowed) when some route serves its path
// with another method, else 404 (ErrNotFound).
func NewMux(t Table, a *Access, completion func(Endpoint) http.HandlerFunc, ready func() bool, own ...Route) http.Handler {
	var routes []Route
	for _, ep := range Endpoints {
		if completion != nil {
			routes = append(routes, Route{Pattern: "POST " + ep.Path(), Handler: completion(ep)})
		}
	}
	routes = append(routes, own...)
	if a != nil {
		for i := range routes {
			routes[i].Handler = a.Guard(t, routes[i].Scope, routes[i].Handler)
		}
	}
	routes = append(routes,
		Route{Pattern: "GET /health", Handler: func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
		}},
		Route{Pattern: "GET /ready", Handler: func(w http.ResponseWriter, _ *http.Request) {
			if !ready() {
				t.Write(w, ErrNotReady)
				return
			}
			WriteJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
		}})
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
