package sim

import (
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/routing"
)

// SampleInterval is the simulated time between two timeline samples of the
// engines' load and cache occupancy: fine enough to show a burst, coarse
// enough that a long trace gives a few hundred points.
const SampleInterval = 5 * time.Second

// Record is one routing decision of the per-decision trace, in blocks of
// the engine block size. Every count is capped, as the engines cap hits,
// so that a prompt always computes one token.
type Record struct {
	// Engine is the chosen engine's slot (0-based).
	Engine int `json:"engine"`
	// Blocks is the prompt's complete blocks.
	Blocks int32 `json:"blocks"`
	// Best is the longest cached prefix the router saw on any candidate;
	// Chosen the one on the engine it chose.
	Best   int32 `json:"best"`
	Chosen int32 `json:"chosen"`
	// Hit is the prefix the engine found at admission.
	Hit int32 `json:"hit"`
	// Pooled is the prompt's hits in the pooled-capacity reference.
	Pooled int32 `json:"pooled"`
	// Computed is the longest prefix of the prompt that a request had
	// computed (reached its first token) anywhere in the fleet by the
	// decision.
	Computed int32 `json:"computed"`
	// At is the request's arrival and Done its end, from the start of the
	// replay; TTFT is its time to first token.
	At   time.Duration `json:"at"`
	TTFT time.Duration `json:"ttft"`
	Done time.Duration `json:"done"`
}

// Sample is the fleet's state at one moment of the timeline.
type Sample struct {
	// At is the time from the start of the replay.
	At time.Duration
	// Load is each engine's report at that time.
	Load []mocker.Load
}

// Detail is a replay's per-decision trace and timeline, for the loss
// breakdown and the report's charts. Decisions are in prompt order.
type Detail struct {
	Decisions []Record
	Timeline  []Sample
}

// Losses breaks down where a policy's hits fall short of the pooled
// reference, in blocks summed over the requests. For each request the gap
// pooled - hit telescopes into the terms below, each clamped so that they
// sum exactly: Pooled - Hit = NotComputed + Evicted + Override + Queued -
// Beyond.
type Losses struct {
	// Pooled and Hit are the blocks hit by the pooled reference and by
	// the policy.
	Pooled int64 `json:"pooled"`
	Hit    int64 `json:"hit"`
	// NotComputed: the pooled reference hit blocks that no request had
	// finished computing when this one was routed (it ignores time:
	// concurrent requests with a common prefix).
	NotComputed int64 `json:"not_computed"`
	// Evicted: blocks computed earlier but held by no engine at the
	// decision. The pooled cache kept them; the fleet evicted them
	// because placement held copies on several engines or filled one
	// engine more than another.
	Evicted int64 `json:"evicted"`
	// Override: another engine held more of the prompt than the one
	// chosen: the load terms outweighed the cache.
	Override int64 `json:"override"`
	// Queued: the chosen engine held blocks at the decision but evicted
	// them before the request was admitted.
	Queued int64 `json:"queued"`
	// Beyond: hits the pooled reference did not have (a block it had
	// evicted was still on an engine, or was computed while the request
	// waited).
	Beyond int64 `json:"beyond"`
}

// Losses computes the breakdown of a replay's decisions.
func (d *Detail) Losses() Losses {
	var l Losses
	for _, r := range d.Decisions {
		a := int64(r.Pooled)
		s := min(a, int64(r.Computed))
		b := min(s, int64(r.Best))
		c := min(b, int64(r.Chosen))
		h := min(c, int64(r.Hit))
		l.Pooled += a
		l.Hit += int64(r.Hit)
		l.NotComputed += a - s
		l.Evicted += s - b
		l.Override += b - c
		l.Queued += c - h
		l.Beyond += int64(r.Hit) - h
	}
	return l
}

// traceRecorder collects a replay's Detail as it runs.
type traceRecorder struct {
	recs []Record
	// computed holds every block that a request had computed, for
	// Record.Computed.
	computed   map[routing.SeqHash]struct{}
	timeline   []Sample
	nextSample time.Time
}

func newTraceRecorder(prompts int) *traceRecorder {
	return &traceRecorder{recs: make([]Record, prompts), computed: make(map[routing.SeqHash]struct{})}
}

// sample records every engine's load at most once per SampleInterval.
func (t *traceRecorder) sample(now time.Time, engines []*mocker.Engine) {
	if now.Before(t.nextSample) {
		return
	}
	s := Sample{At: now.Sub(epoch), Load: make([]mocker.Load, len(engines))}
	for i, e := range engines {
		s.Load[i] = e.Load()
	}
	t.timeline = append(t.timeline, s)
	t.nextSample = now.Add(SampleInterval)
}

// decided records the decision on prompt i.
func (t *traceRecorder) decided(i int, p *Prompt, now time.Time, rt routed, limit int) {
	n := 0
	for n < limit {
		if _, ok := t.computed[p.Hashes[n]]; !ok {
			break
		}
		n++
	}
	t.recs[i] = Record{At: now.Sub(epoch), Engine: rt.slot, Blocks: int32(len(p.Hashes)), Best: int32(min(rt.best, limit)),
		Chosen: int32(min(rt.chosen, limit)), Computed: int32(n)}
}

// index is the prompt index behind a request id (the replay names requests
// by their index).
func (t *traceRecorder) index(id string) (int, bool) {
	i, err := strconv.Atoi(id)
	return i, err == nil && i >= 0 && i < len(t.recs)
}

func (t *traceRecorder) admitted(id string, hits int) {
	if i, ok := t.index(id); ok {
		t.recs[i].Hit = int32(hits)
	}
}

// firstToken marks a prompt's blocks computed once it has its first token.
func (t *traceRecorder) firstToken(id string, prompts []Prompt) {
	if i, ok := t.index(id); ok {
		for _, h := range prompts[i].Hashes {
			t.computed[h] = struct{}{}
		}
	}
}

func (t *traceRecorder) finished(id string, ttft time.Duration, done time.Time) {
	if i, ok := t.index(id); ok {
		t.recs[i].TTFT, t.recs[i].Done = ttft, done.Sub(epoch)
	}
}

// detail returns the trace with the pooled reference's hits filled in.
func (t *traceRecorder) detail(refs References) *Detail {
	for i := range t.recs {
		if i < len(refs.PooledHits) {
			t.recs[i].Pooled = refs.PooledHits[i]
		}
	}
	return &Detail{Decisions: t.recs, Timeline: t.timeline}
}
