package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// nodePool is the local DC's router nodes: round-robin over the healthy
// ones, health from /ready polling and from refused connections. It is
// safe for concurrent use.
type nodePool struct {
	urls    []string
	healthy []atomic.Bool
	next    atomic.Uint64
}

// newNodePool starts every node healthy, so that a gateway serves at once;
// the first poll or refused connection corrects it.
func newNodePool(urls []string) *nodePool {
	p := &nodePool{urls: make([]string, len(urls)), healthy: make([]atomic.Bool, len(urls))}
	for i, u := range urls {
		p.urls[i] = trimBase(u)
		p.healthy[i].Store(true)
	}
	return p
}

// order returns the nodes to try for one request: the healthy ones from
// the round-robin position on, then the unhealthy ones, since a node that
// failed its last poll may be back and trying it beats refusing.
func (p *nodePool) order() []int {
	n := len(p.urls)
	start := int(p.next.Add(1) % uint64(n))
	out := make([]int, 0, n)
	for pass := 0; pass < 2; pass++ {
		for k := 0; k < n; k++ {
			i := (start + k) % n
			if p.healthy[i].Load() == (pass == 0) {
				out = append(out, i)
			}
		}
	}
	return out
}

// markDown records a node that refused a connection.
func (p *nodePool) markDown(i int) { p.healthy[i].Store(false) }

// anyHealthy reports whether some node passed its last check.
func (p *nodePool) anyHealthy() bool {
	for i := range p.healthy {
		if p.healthy[i].Load() {
			return true
		}
	}
	return false
}

// poll checks every node's /ready in parallel.
func (p *nodePool) poll(ctx context.Context, client *http.Client) {
	var wg sync.WaitGroup
	for i, u := range p.urls {
		wg.Go(func() { p.healthy[i].Store(ready(ctx, client, u)) })
	}
	wg.Wait()
}

// ready reports whether a node answers /ready with 200.
func ready(ctx context.Context, client *http.Client, base string) bool {
	return getJSON(ctx, client, base+"/ready", 0, nil) == nil
}

// getJSON GETs u within ControlTimeout and decodes its 200 answer, of at
// most limit bytes, into v (nil: the status alone matters).
func getJSON(ctx context.Context, client *http.Client, u string, limit int64, v any) error {
	ctx, cancel := context.WithTimeout(ctx, ControlTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %d", resp.StatusCode)
	case v != nil:
		return json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(v)
	}
	return nil
}

// pollLoop polls every interval until ctx ends.
func (p *nodePool) pollLoop(ctx context.Context, client *http.Client, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.poll(ctx, client)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// isRefused reports a failure to connect, after which the request surely
// did not reach the node and may be sent to another. A failure after the
// connection was made is not retried: the node may have started the
// generation.
func isRefused(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op) && op.Op == "dial"
}
