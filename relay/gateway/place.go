package gateway

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// maxScratchHashes bounds the hash buffer kept in the pool, so that one
// huge prompt does not pin its buffer for the life of the process.
const maxScratchHashes = 1 << 14

// target chooses the DC of a request that was not forwarded here:
// sessions go to the DC that owns them, other requests by the policy.
func (x *exchange) target(req *oaiedge.Request, now time.Time) target {
	if x.session != "" {
		return x.placeSession()
	}
	g := x.g
	sc := scratchPool.Get().(*scratch)
	ch := g.decide(req, now, sc)
	if cap(sc.hashes) <= maxScratchHashes {
		scratchPool.Put(sc)
	}
	if ch.Remote {
		return target{remote: true, dc: ch.Best.DC}
	}
	return target{dc: g.cfg.DC}
}

// placeSession finds the DC that owns the session (doc.go, Sessions):
// the DC it is bound in; when bound both here and elsewhere, the one the
// session's home ranking prefers, and the losing local binding is
// dropped; when bound nowhere, its home.
func (x *exchange) placeSession() target {
	g, ctx, key := x.g, x.r.Context(), x.session
	localBound, rdc, rok := g.lookups(ctx, key)
	local := target{dc: g.cfg.DC}
	switch {
	case rok && localBound:
		g.metrics.SessionPlacements.WithLabelValues(placeTieBreak).Inc()
		if g.homes.Prefer(key, g.cfg.DC, rdc) == g.cfg.DC {
			return local
		}
		g.dropLocalBinding(ctx, key)
		return target{remote: true, dc: rdc}
	case rok:
		g.metrics.SessionPlacements.WithLabelValues(placeRemoteBinding).Inc()
		return target{remote: true, dc: rdc}
	case localBound:
		g.metrics.SessionPlacements.WithLabelValues(placeLocalBinding).Inc()
		return local
	}
	if home := g.homes.Home(key); home != g.cfg.DC {
		g.metrics.SessionPlacements.WithLabelValues(placeHomeRemote).Inc()
		return target{remote: true, dc: home}
	}
	g.metrics.SessionPlacements.WithLabelValues(placeHomeLocal).Inc()
	return local
}

// lookups asks a local node whether the session is bound here and the
// SessionLocator where else it is. With a locator the two run in
// parallel, the local one on a goroutine of its own, which the call
// waits for; without one there is nothing to overlap, and the local
// lookup runs on the caller's goroutine.
func (g *Gateway) lookups(ctx context.Context, key string) (localBound bool, dc string, ok bool) {
	if g.cfg.Sessions == nil {
		return g.boundLocally(ctx, key), "", false
	}
	var wg sync.WaitGroup
	wg.Go(func() { localBound = g.boundLocally(ctx, key) })
	dc, ok = g.locate(ctx, key)
	wg.Wait()
	return localBound, dc, ok
}

// locate asks the SessionLocator (set), keeping only configured DCs. A
// lookup error counts as "bound nowhere else": the session then goes to
// its home, the only DC that binds new sessions.
func (g *Gateway) locate(ctx context.Context, key string) (string, bool) {
	dc, ok, err := g.cfg.Sessions.Locate(ctx, key)
	if err != nil {
		g.cfg.Log.Warn("locating a session", "session", key, "err", err)
	}
	if _, known := g.remotes[dc]; !ok || !known {
		return "", false
	}
	return dc, true
}

// boundLocally asks a local router node whether the session is bound in
// this DC (GET /v1/sessions/{id}: 200 bound, 404 not). A failed lookup
// counts as unbound; the node that serves the request finds its own
// binding anyway.
func (g *Gateway) boundLocally(ctx context.Context, key string) bool {
	resp, err := g.nodeControl(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(key))
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// dropLocalBinding ends this DC's binding of a session another DC won.
func (g *Gateway) dropLocalBinding(ctx context.Context, key string) {
	resp, err := g.nodeControl(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(key))
	if err != nil {
		g.cfg.Log.Warn("dropping a losing session binding", "session", key, "err", err)
		return
	}
	_ = resp.Body.Close()
	g.cfg.Log.Info("dropped a losing session binding", "session", key, "dc", g.cfg.DC)
}

// nodeControl sends a bodiless control request to a local router node,
// trying the next on a refused connection. The caller closes the body.
func (g *Gateway) nodeControl(ctx context.Context, method, path string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, ControlTimeout)
	var resp *http.Response
	var err error
	for _, i := range g.nodes.order() {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, method, g.nodes.urls[i]+path, nil)
		if err != nil {
			break
		}
		if t := g.cfg.Edge.UpstreamToken; t != "" {
			req.Header.Set("Authorization", "Bearer "+t)
		}
		if resp, err = g.client.Do(req); err == nil {
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
			return resp, nil
		}
		if !isRefused(err) {
			break
		}
		g.nodes.markDown(i)
	}
	cancel()
	return nil, err
}
