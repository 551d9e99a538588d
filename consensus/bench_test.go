package consensus

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// BenchmarkBindCommit measures a bind's commit latency on a 3-node
// in-memory cluster, proposed on the leader, with 1 and 64 concurrent
// clients; p50 and p99 are reported in microseconds.
func BenchmarkBindCommit(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c := newClusterWith(b, 3, benchConfig)
			leader := c.nodes[c.leader()]
			var seq atomic.Uint64
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(max(1, clients/maxProcs()))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					k := seq.Add(1)
					start := time.Now()
					cmd := bindCmd(fmt.Sprintf("k%d", k), k, 0, 0, "")
					cmd.MaxSessions = 1 << 30
					r, err := leader.Apply(context.Background(), cmd)
					if err != nil || !r.Won {
						b.Errorf("bind: %v %v", r, err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			reportQuantiles(b, lat)
		})
	}
}

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

// BenchmarkKVEventsThroughRaft feeds KV events (64 ranks × 16 stored
// events of 4 blocks per round) through a Batcher on the leader of a
// 3-node in-memory cluster. It reports events/s, counted until the last
// event is visible in every node's index, and the p99 lag from Batcher.Add
// to visibility in every node's index (sampled on one rank each round).
// rate=max offers events as fast as the backlog admits them (its lag is
// the full backlog's queueing); a fixed rate paces the offer, as a DC's
// engines do. All three nodes share the machine's cores, so events/s is
// bounded by three FSM applies per entry.
func BenchmarkKVEventsThroughRaft(b *testing.B) {
	for _, rate := range []int{0, 20_000, 40_000, 300_000} {
		name := "rate=max"
		if rate > 0 {
			name = fmt.Sprintf("rate=%d", rate)
		}
		b.Run(name, func(b *testing.B) { benchKVEvents(b, rate) })
	}
}

// benchKVEvents runs one KV-events benchmark offering rate events/s (0:
// as fast as admitted).
func benchKVEvents(b *testing.B, rate int) {
	c := newClusterWith(b, 3, benchConfig)
	leader := c.nodes[c.leader()]
	bt := NewBatcher(leader, BatcherConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { bt.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	lag := newLagProbe(c.nodes, routing.Worker{ID: 1})
	wg.Go(func() { lag.run(ctx) })
	const ranks, perBatch = 64, 16
	next := make([]uint64, ranks)
	for i := range next {
		next[i] = 1
	}
	events := 0
	start := time.Now()
	for b.Loop() {
		for r := range ranks {
			w := routing.Worker{ID: routing.WorkerID(r + 1)}
			batch := kvBatch(w, next[r], perBatch, next[r])
			for bt.Add(batch) != nil {
				time.Sleep(100 * time.Microsecond)
			}
			if r == 0 {
				lag.sent(next[r]+perBatch-1, time.Now())
			}
			next[r] += perBatch
		}
		events += ranks * perBatch
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(events) / float64(rate) * float64(time.Second)))))
		}
	}
	end, ok := lag.wait(next[0]-1, 10*time.Second)
	if !ok {
		b.Fatal("events not visible on every node within 10s")
	}
	b.ReportMetric(float64(events)/end.Sub(start).Seconds(), "events/s")
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
