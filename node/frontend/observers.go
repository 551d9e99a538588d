package frontend

import (
	"sync"
	"sync/atomic"

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
	// duration is by endpoint and outcome, each child resolved on first
	// use (durationOf): a histogram child is 20 lines of /metrics, and
	// children for every endpoint and outcome of every model were most
	// of a small fleet's page. The request counters stay eager, one line
	// each, so that rates of an outcome that has not happened read 0.
	duration [oaiedge.NumEndpoints][len(outcomes)]atomic.Pointer[prometheus.Observer]
	// cached and hit are the engine-reported cache figures (serving.go).
	cached prometheus.Counter
	hit    prometheus.Observer
	model  string
	vec    *prometheus.HistogramVec
}

// durationOf returns the duration child of endpoint ep and outcome oc.
// Two first uses may both resolve it; the vector returns the same child.
func (o *modelObservers) durationOf(ep oaiedge.Endpoint, oc int) prometheus.Observer {
	cell := &o.duration[ep][oc]
	if p := cell.Load(); p != nil {
		return *p
	}
	obs := o.vec.WithLabelValues(o.model, ep.Path(), outcomes[oc])
	cell.Store(&obs)
	return obs
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
		model: model, vec: c.m.Serving.Duration,
	}
	for ep := range o.requests {
		for i, oc := range outcomes {
			o.requests[ep][i] = c.m.Requests.WithLabelValues(model, oaiedge.Endpoint(ep).Path(), oc)
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
