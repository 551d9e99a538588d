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

	"github.com/kvrouter/kvrouter/proto/kvrpb"
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
// does not trigger elections in the middle of a measurement.
func benchConfig(c *Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	c.ApplyTimeout = 5 * time.Second
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

// BenchmarkKVEventsThroughRaft proposes coalesced KV event entries (64
// ranks × 16 stored events of 4 blocks each) on the leader of a 3-node
// in-memory cluster and reports events committed per second.
func BenchmarkKVEventsThroughRaft(b *testing.B) {
	c := newClusterWith(b, 3, benchConfig)
	leader := c.nodes[c.leader()]
	const ranks, perBatch = 64, 16
	next := make([]uint64, ranks)
	for i := range next {
		next[i] = 1
	}
	events := 0
	start := time.Now()
	for b.Loop() {
		cmd := &kvrpb.RaftKVEvents{}
		for r := range ranks {
			w := routing.Worker{ID: routing.WorkerID(r + 1)}
			cmd.Batches = append(cmd.Batches, kvBatch(w, next[r], perBatch, next[r]))
			next[r] += perBatch
		}
		if _, err := leader.Apply(context.Background(), cmd); err != nil {
			b.Fatal(err)
		}
		events += ranks * perBatch
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}
