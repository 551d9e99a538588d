package gateway

import (
	"context"
	"net/http"
	"sync"
)

// A remote DC may run several relays, each one a gateway (a DC without a
// single point of failure). Behind one Service they share one URL and the
// Service balances; listed one by one (Remote.Alternates) the gateway
// itself balances over them: round-robin over those that answer /ready,
// the next one when one refuses the connection (nothing reached it, so
// the request may go elsewhere), and no retry once a connection was made,
// since the remote DC may have started the generation.

// gateways returns r's gateway base URLs: URL first, then Alternates.
func (r Remote) gateways() []string {
	out := make([]string, 0, 1+len(r.Alternates))
	for _, u := range append([]string{r.URL}, r.Alternates...) {
		out = append(out, trimBase(u))
	}
	return out
}

// newRemotePools builds one pool of gateways per remote DC.
func newRemotePools(remotes []Remote) map[string]*nodePool {
	out := make(map[string]*nodePool, len(remotes))
	for _, r := range remotes {
		out[r.DC] = newNodePool(r.gateways())
	}
	return out
}

// sendRemote posts the request to dc's gateways in the pool's order until
// one accepts the connection; a refusal marks that gateway down until its
// next good poll. The error is the last gateway's.
func (x *exchange) sendRemote(dc string) (*http.Response, error) {
	p := x.g.remoteGWs[dc]
	var lastErr error
	for n, i := range p.order() {
		if n > 0 {
			x.g.metrics.NodeRetries.Inc()
		}
		resp, err := x.send(p.urls[i], x.g.cfg.DC)
		if err == nil || !isRefused(err) {
			return resp, err
		}
		p.markDown(i)
		lastErr = err
	}
	return nil, lastErr
}

// pollRemotes polls every remote gateway pool with more than one gateway
// until ctx ends (a single one has no alternative to prefer).
func (g *Gateway) pollRemotes(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range g.remoteGWs {
		if len(p.urls) > 1 {
			wg.Go(func() { p.pollLoop(ctx, g.client, g.cfg.HealthInterval) })
		}
	}
	wg.Wait()
}

// askGateways calls ask on r's gateways in order until one accepts the
// connection, for the session lookups.
func askGateways(r Remote, ask func(base string) (bool, error)) (bool, error) {
	var err error
	for _, base := range r.gateways() {
		var bound bool
		if bound, err = ask(base); err == nil || !isRefused(err) {
			return bound, err
		}
	}
	return false, err
}
