package consumer

import (
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
)

// BenchmarkStaleness150msRTT measures, over TCP loopback with 75 ms added
// to each direction (150 ms round trip), how long a change takes from the
// producer's Apply to being visible in the lane (change-to-visible
// staleness), for a stream of 200 batches/s with 10 heartbeats/s, over
// 3 s; halfway the subscriber is cut (lagged) and must resubscribe from a
// snapshot, so the tail includes a recovery. Also reported: the lane's own
// staleness (time since it last heard anything) sampled every 5 ms. It
// runs once per summary kind. Run with -benchtime=1x.
func BenchmarkStaleness150msRTT(b *testing.B) {
	for _, kind := range []filter.Kind{filter.KindCuckoo, filter.KindCuckooCompact, filter.KindBloom} {
		b.Run("kind="+kind.String(), func(b *testing.B) {
			testKind = kind
			defer func() { testKind = filter.KindCuckoo }()
			for b.Loop() {
				visible, sampled := stalenessRun(b, 75*time.Millisecond, 3*time.Second)
				reportLatencies(b, visible)
				slices.Sort(sampled)
				b.ReportMetric(float64(sampled[len(sampled)*99/100].Milliseconds()), "lane-staleness-p99-ms")
				b.ReportMetric(float64(len(visible)), "deltas")
			}
		})
	}
}

// stalenessRun runs the scenario and returns change-to-visible latencies
// and sampled lane staleness.
func stalenessRun(b *testing.B, oneWay, length time.Duration) (visible, sampled []time.Duration) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := newProducer(b, poolIn("dc-far"), 1<<16, 1, 64)
	var mu sync.Mutex
	applied := map[uint64]time.Time{}
	s := startServer(b, delayListener{Listener: lis, delay: oneWay}, nil, nil,
		func(c net.Conn) net.Conn { return newDelayConn(c, oneWay) })
	s.srv.Register(p)
	c, err := New(Config{SubscriberID: "bench", Now: time.Now, BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second,
		Observe: func(_ producer.PoolID, ev publish.Event, at time.Time) {
			if ev.Kind != publish.EventDelta && ev.Kind != publish.EventSnapshot {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for seq, t := range applied {
				if seq <= ev.Seq {
					visible = append(visible, at.Sub(t))
					delete(applied, seq)
				}
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	l, _ := c.AddLane(poolIn("dc-far"), s.client)
	waitConverged(b, l, p)
	sampled = drive(b, p, s, l, &mu, applied, length)
	return visible, sampled
}

// drive applies batches at 200/s and heartbeats at 10/s for length,
// stamping each published seq, cuts the subscriber once halfway, and
// samples the lane's staleness every 5 ms.
func drive(b *testing.B, p *producer.Producer, s *server, l *Lane, mu *sync.Mutex, applied map[uint64]time.Time, length time.Duration) []time.Duration {
	rng := rand.New(rand.NewPCG(3, 3))
	ctx, cancel := context.WithTimeout(context.Background(), length)
	defer cancel()
	tick, beat, sample := time.NewTicker(5*time.Millisecond), time.NewTicker(100*time.Millisecond), time.NewTicker(5*time.Millisecond)
	defer tick.Stop()
	defer beat.Stop()
	defer sample.Stop()
	var sampled []time.Duration
	cut := time.Now().Add(length / 2)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-beat.C:
			s.srv.Beat(now)
		case now := <-sample.C:
			sampled = append(sampled, l.Status(now).Staleness)
		case <-tick.C:
			if !cut.IsZero() && time.Now().After(cut) {
				release := s.faults.hold()
				for range 80 { // more than the queue of 64: a lag
					applyStamped(b, p, rng, mu, applied)
				}
				release()
				cut = time.Time{}
			}
			applyStamped(b, p, rng, mu, applied)
		}
	}
	return sampled
}

// applyStamped applies one batch and stamps the seq it published.
func applyStamped(b *testing.B, p *producer.Producer, rng *rand.Rand, mu *sync.Mutex, applied map[uint64]time.Time) {
	mu.Lock()
	defer mu.Unlock()
	if err := p.Apply(storeBatch(1, chain(rng, 4)...)); err != nil {
		b.Fatal(err)
	}
	_, seq := p.Epoch()
	applied[seq] = time.Now()
}
