package consensus

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// benchConfig uses LAN-default raft timeouts, so that a loaded machine
// does not trigger elections in the middle of a measurement, and the
// default CommitTimeout, which bounds how soon followers see a burst's
// last entry.
func benchConfig(c *Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	c.ApplyTimeout = 5 * time.Second
	c.CommitTimeout = 0
}

// maxProcs is GOMAXPROCS, the factor RunParallel multiplies parallelism by.
func maxProcs() int { return runtime.GOMAXPROCS(0) }

func reportQuantiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// BenchmarkKVEventsThroughRaft feeds KV events (64 ranks × 16 events of 4
// blocks per round) through a Batcher on the leader of a 3-node
// in-memory cluster. It reports events/s and blocks/s (4 per event),
// counted until the last event is visible in every node's index, and the
// p99 lag from Batcher.Add to visibility in every node's index (sampled
// on one rank each round). rate=max offers events as fast as the backlog
// admits them (its lag is the full backlog's queueing); a fixed rate
// paces the offer, as a DC's engines do. The unprefixed runs use the grow
// workload (every event stores new blocks, so every table and index grows
// for the whole run); steady/ runs remove as many blocks as they store,
// like engines whose caches are full. All three nodes share the machine's
// cores, so events/s is bounded by three FSM applies per entry
// (BenchmarkApplyKVEventsStages measures one).
func BenchmarkKVEventsThroughRaft(b *testing.B) {
	for _, rate := range []int{0, 20_000, 40_000, 300_000} {
		b.Run(rateName(rate), func(b *testing.B) { benchKVEvents(b, growWorkload, rate) })
	}
	for _, rate := range []int{0, 100_000, 200_000, 300_000} {
		b.Run("steady/"+rateName(rate), func(b *testing.B) { benchKVEvents(b, steadyWorkload, rate) })
	}
}

// rateName names a sub-benchmark by its offered rate.
func rateName(rate int) string {
	if rate == 0 {
		return "rate=max"
	}
	return fmt.Sprintf("rate=%d", rate)
}

// benchKVEvents runs one KV-events benchmark offering rate events/s (0:
// as fast as admitted).
func benchKVEvents(b *testing.B, wl workload, rate int) {
	c := newClusterWith(b, 3, benchConfig)
	leader := c.nodes[c.leader()]
	bt := NewBatcher(leader, BatcherConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { bt.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	lag := newLagProbe(c.nodes, routing.Worker{ID: 1})
	wg.Go(func() { lag.run(ctx) })
	next := firstIDs()
	events := 0
	start := time.Now()
	for b.Loop() {
		for r := range benchRanks {
			w := routing.Worker{ID: routing.WorkerID(r + 1)}
			batch := wl.batch(w, next[r], benchPerBatch)
			for bt.Add(batch) != nil {
				time.Sleep(100 * time.Microsecond)
			}
			if r == 0 {
				lag.sent(next[r]+benchPerBatch-1, time.Now())
			}
			next[r] += benchPerBatch
		}
		events += benchRanks * benchPerBatch
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(events) / float64(rate) * float64(time.Second)))))
		}
	}
	end, ok := lag.wait(next[0]-1, 10*time.Second)
	if !ok {
		b.Fatal("events not visible on every node within 10s")
	}
	perSec := float64(events) / end.Sub(start).Seconds()
	b.ReportMetric(perSec, "events/s")
	b.ReportMetric(4*perSec, "blocks/s")
	b.ReportMetric(float64(lag.p99().Microseconds())/1000, "lag-p99-ms")
}

// lagProbe measures how long one rank's events take from Batcher.Add to
// being visible in every node's index, by polling the index cursors.
type lagProbe struct {
	nodes []*Node
	w     routing.Worker

	mu    sync.Mutex
	ids   []uint64
	times []time.Time
	lags  []time.Duration
	seen  uint64
	at    time.Time
}

func newLagProbe(nodes []*Node, w routing.Worker) *lagProbe {
	return &lagProbe{nodes: nodes, w: w}
}

// sent records that the events up to id were added at t.
func (p *lagProbe) sent(id uint64, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids, p.times = append(p.ids, id), append(p.times, t)
}

// run polls every 200 µs until ctx ends.
func (p *lagProbe) run(ctx context.Context) {
	t := time.NewTicker(200 * time.Microsecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.poll(now)
		}
	}
}

// poll records the lag of every sample now visible on all nodes.
func (p *lagProbe) poll(now time.Time) {
	visible := uint64(1<<64 - 1)
	for _, n := range p.nodes {
		cur, _ := n.FSM().Index().Cursor(p.w)
		visible = min(visible, cur)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ids) > 0 && p.ids[0] <= visible {
		p.lags = append(p.lags, now.Sub(p.times[0]))
		p.ids, p.times = p.ids[1:], p.times[1:]
	}
	if visible > p.seen {
		p.seen, p.at = visible, now
	}
}

// wait returns when the events up to id became visible on every node,
// or false after timeout.
func (p *lagProbe) wait(id uint64, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		seen, at := p.seen, p.at
		p.mu.Unlock()
		if seen >= id {
			return at, true
		}
		time.Sleep(100 * time.Microsecond)
	}
	return time.Time{}, false
}

// p99 returns the 99th percentile lag.
func (p *lagProbe) p99() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lags) == 0 {
		return 0
	}
	slices.Sort(p.lags)
	return p.lags[int(0.99*float64(len(p.lags)-1))]
}
