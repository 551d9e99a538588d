package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// maxModelsAnswerBytes bounds one node's /v1/models answer.
const maxModelsAnswerBytes = 4 << 20

// modelList is the OpenAI list shape; Data keeps each model object as
// the node wrote it.
type modelList struct {
	Object string            `json:"object"`
	Data   []json.RawMessage `json:"data"`
}

// modelID reads the id of a model object.
type modelID struct {
	ID string `json:"id"`
}

// handleModels answers the union of the local router nodes' models,
// sorted by id, the first node's object winning for a shared id. Nodes
// that fail are left out; when all fail the answer is a 502.
func (g *Gateway) handleModels(w http.ResponseWriter, r *http.Request) {
	models, ok := g.allModels(r.Context())
	if !ok {
		errorTable.Write(w, ErrNoNode)
		return
	}
	oaiedge.WriteOK(w, modelList{Object: "list", Data: models})
}

// allModels fetches every local node's model list in parallel and
// returns their union (unionByID); false when no node answered.
func (g *Gateway) allModels(ctx context.Context) ([]json.RawMessage, bool) {
	lists := make([][]json.RawMessage, len(g.nodes.urls))
	oks := make([]bool, len(g.nodes.urls))
	var wg sync.WaitGroup
	for i, u := range g.nodes.urls {
		wg.Go(func() { lists[i], oks[i] = g.nodeModels(ctx, u) })
	}
	wg.Wait()
	return unionByID(lists), slices.Contains(oks, true)
}

// handleModel answers one model of the local router nodes' union, GET
// /v1/models/{id}: the object of the first node that lists it, 404
// model_not_found when none does.
func (g *Gateway) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	models, ok := g.allModels(r.Context())
	if !ok {
		errorTable.Write(w, ErrNoNode)
		return
	}
	for _, m := range models {
		var mid modelID
		if json.Unmarshal(m, &mid) == nil && mid.ID == id {
			oaiedge.WriteJSON(w, http.StatusOK, m)
			return
		}
	}
	errorTable.Write(w, fmt.Errorf("%w: %q", ErrModelNotFound, id))
}

// unionByID merges model lists by id, sorted by id.
func unionByID(lists [][]json.RawMessage) []json.RawMessage {
	seen := map[string]json.RawMessage{}
	var ids []string
	for _, l := range lists {
		for _, m := range l {
			var id modelID
			if json.Unmarshal(m, &id) != nil || id.ID == "" {
				continue
			}
			if _, dup := seen[id.ID]; !dup {
				seen[id.ID] = m
				ids = append(ids, id.ID)
			}
		}
	}
	slices.Sort(ids)
	out := make([]json.RawMessage, 0, len(ids))
	for _, id := range ids {
		out = append(out, seen[id])
	}
	return out
}

// nodeModels fetches one node's model list.
func (g *Gateway) nodeModels(ctx context.Context, base string) ([]json.RawMessage, bool) {
	var l modelList
	if getJSON(ctx, g.client, base+"/v1/models", maxModelsAnswerBytes, &l) != nil {
		return nil, false
	}
	return l.Data, true
}

// nodeBinding is the part of a router node's GET /v1/sessions/{id}
// answer the home endpoint passes on.
type nodeBinding struct {
	Engine  string `json:"engine"`
	Version uint64 `json:"version"`
}

// handleHome answers whether a session is bound in this DC, for other
// DCs' locators: GET /v1/sessions/{id}/home, asking a local router node.
func (g *Gateway) handleHome(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := oaiedge.SessionIDParam(id); err != nil {
		errorTable.Write(w, err)
		return
	}
	resp, err := g.nodeControl(r.Context(), http.MethodGet, "/v1/sessions/"+url.PathEscape(id))
	if err != nil {
		errorTable.Write(w, ErrNoNode)
		return
	}
	defer resp.Body.Close()
	a := HomeAnswer{Session: id, DC: g.cfg.DC}
	switch resp.StatusCode {
	case http.StatusOK:
		var b nodeBinding
		if json.NewDecoder(io.LimitReader(resp.Body, maxHomeAnswerBytes)).Decode(&b) != nil {
			errorTable.Write(w, ErrNoNode)
			return
		}
		a.Bound, a.Engine, a.Version = true, b.Engine, b.Version
	case http.StatusNotFound:
	default:
		errorTable.Write(w, ErrNoNode)
		return
	}
	oaiedge.WriteOK(w, a)
}
