package frontend

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// outcomes are the values of the requests counter's outcome label, in the
// order of outcomeIndex.
var outcomes = [...]string{"ok", "client_error", "server_error", "canceled"}

// outcomeIndex is outcome(status) as an index into outcomes.
func outcomeIndex(status int) int {
	switch {
	case status == StatusClientClosed:
		return 3
	case status < 400:
		return 0
	case status < 500:
		return 1
	}
	return 2
}

// modelObservers are one model's metric children, resolved once: looking
// children up by label values hashes the values on every call, which the
// request path would otherwise do five times per request.
type modelObservers struct {
	requests      [oaiedge.NumEndpoints][len(outcomes)]prometheus.Counter // by endpoint, outcome
	input, output prometheus.Observer
	ttft, itl     prometheus.Observer
	// duration is by endpoint and outcome; cached and hit are the
	// engine-reported cache figures (serving.go).
	duration [oaiedge.NumEndpoints][len(outcomes)]prometheus.Observer
	cached   prometheus.Counter
	hit      prometheus.Observer
}

// observerCache holds the children per model label. Only models the router
// accepted (and "" for requests refused before that) get a label, so the
// cache grows no more than the metrics themselves.
type observerCache struct {
	m      *metrics.Metrics
	mu     sync.RWMutex
	models map[string]*modelObservers
}

// forModel returns model's children, resolving them on first use.
func (c *observerCache) forModel(model string) *modelObservers {
	c.mu.RLock()
	o := c.models[model]
	c.mu.RUnlock()
	if o != nil {
		return o
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o = c.models[model]; o != nil {
		return o
	}
	o = &modelObservers{
		input: c.m.InputTokens.WithLabelValues(model), output: c.m.OutputTokens.WithLabelValues(model),
		ttft: c.m.TTFT.WithLabelValues(model), itl: c.m.ITL.WithLabelValues(model),
	}
	for ep := range o.requests {
		for i, oc := range outcomes {
			o.requests[ep][i] = c.m.Requests.WithLabelValues(model, oaiedge.Endpoint(ep).Path(), oc)
			o.duration[ep][i] = c.m.Serving.Duration.WithLabelValues(model, oaiedge.Endpoint(ep).Path(), oc)
		}
	}
	o.cached = c.m.Serving.EngineCachedTokens.WithLabelValues(model)
	o.hit = c.m.Serving.EngineHitRatio.WithLabelValues(model)
	if c.models == nil {
		c.models = make(map[string]*modelObservers)
	}
	c.models[model] = o
	return o
}
