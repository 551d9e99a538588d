package consumer

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// benchLanes is the lane count of the query benchmarks (the reference
// router's maximum).
const benchLanes = 16

// benchConsumer builds a consumer with 16 lanes of 2^19 buckets each
// (sized for 1M blocks, filled to 75% with background blocks) and a set of
// 64-block requests; lane i holds the first depth(r, i) blocks of request
// r (mixedDepths unless given).
func benchConsumer(b testing.TB, requests int, depth func(r, i int) int) (*Consumer, [][]routing.SeqHash) {
	b.Helper()
	if depth == nil {
		depth = mixedDepths
	}
	rng := rand.New(rand.NewPCG(42, 42))
	reqs := make([][]routing.SeqHash, requests)
	for r := range reqs {
		reqs[r] = chain(rng, 64)
	}
	set := &laneSet{byDomain: map[producer.Domain][]*laneEntry{}}
	for i := range benchLanes {
		f, err := filter.NewCuckoo(filter.Config{Capacity: 1 << 20}, rand.New(rand.NewPCG(uint64(i), 1)))
		if err != nil {
			b.Fatal(err)
		}
		for r, hs := range reqs {
			for _, h := range hs[:depth(r, i)] {
				_ = f.Insert(h)
			}
		}
		for f.LoadFactor() < 0.75 {
			_ = f.Insert(routing.SeqHash(rng.Uint64()))
		}
		l := &Lane{pool: poolIn(string(rune('a' + i))), f: f, heard: benchHeard}
		set = set.with(&laneEntry{lane: l})
	}
	c := &Consumer{cfg: Config{VerifyWindow: DefaultVerifyWindow}}
	c.lanes.Store(set)
	return c, reqs
}

// benchHeard is when the benchmarks' lanes last heard from their pools,
// and benchNow a second later the time of their queries. Both carry the
// monotonic clock reading, as the times of a running relay do (lanes are
// stamped by Config.Now and requests by time.Now); staleness between
// times without it, such as time.Unix's, takes the wall clock's slower
// path through time.Time.Sub, which would be a tenth of a hot query.
var (
	benchHeard = time.Now()
	benchNow   = benchHeard.Add(time.Second)
)

// The lane depths of the query benchmarks: mixed depths spread over
// 0..64 (lane i holds request r's first (r*7+i*5)%65 blocks), every lane
// holding the whole request, no lane holding any of it (the request's
// prefix is new to the other DCs), and one lane, a different one per
// request, holding 50 blocks while the others hold none.
func mixedDepths(r, i int) int { return (r*7 + i*5) % 65 }
func fullDepths(_, _ int) int  { return 64 }
func noDepths(_, _ int) int    { return 0 }
func oneDeep(r, i int) int {
	if i == r%benchLanes {
		return 50
	}
	return 0
}

// queryCases are the lanes and requests of both query benchmarks.
var queryCases = []struct {
	name     string
	requests int
	depth    func(r, i int) int
}{
	{name: "mixed-depths/hot", requests: 1},
	{name: "mixed-depths/4096-requests", requests: 4096},
	{name: "all-lanes-full/4096-requests", requests: 4096, depth: fullDepths},
	{name: "no-lane-holds-it/4096-requests", requests: 4096, depth: noDepths},
	{name: "one-lane-deep/4096-requests", requests: 4096, depth: oneDeep},
}

// reportLatencies reports the p50 and p99 of lat in ns and returns the
// p50.
func reportLatencies(b *testing.B, lat []time.Duration) time.Duration {
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0
	}
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	return lat[len(lat)/2]
}

// BenchmarkQuery16Lanes64Blocks measures one prefix query over 16 lanes
// for a 64-block request, over the lanes of queryCases, and records each
// query's latency.
func BenchmarkQuery16Lanes64Blocks(b *testing.B) {
	var hotP50 time.Duration
	for _, bc := range queryCases {
		b.Run(bc.name, func(b *testing.B) {
			c, reqs := benchConsumer(b, bc.requests, bc.depth)
			probes := meanProbes(reqs, func(hs []routing.SeqHash) (n int) {
				for _, e := range c.lanes.Load().byDomain[domain] {
					_, p := prefixSearch(e.lane.f, hs, DefaultVerifyWindow)
					n += p
				}
				return n
			})
			dst := make([]Result, 0, benchLanes)
			now := benchNow
			p50 := reportLatencies(b, timeEach(b, reqs, func(hs []routing.SeqHash) { dst = c.Query(dst[:0], domain, hs, now) }))
			b.ReportMetric(probes, "probes/query")
			if bc.requests == 1 {
				hotP50 = p50
			}
		})
	}
	b.Run("noise-floor", func(b *testing.B) { benchNoiseFloor(b, hotP50) })
}

// BenchmarkBest16Lanes64Blocks measures Best, the serving path's
// question, over the lanes and requests of BenchmarkQuery16Lanes64Blocks
// (run both in one invocation to compare them): the lane a request gains
// most from when lanes differ only by depth, and (at-distances) when each
// lane's DC is a round trip further off (3.2 ms per block, 10 ms more per
// lane, as the gateway's policy computes it). It also reports the filter
// lookups per query and the rounds (reads of lookups issued together; the
// verification after the last is not counted).
func BenchmarkBest16Lanes64Blocks(b *testing.B) {
	run := func(name string, requests int, depth func(r, i int) int, o Objective) {
		b.Run(name, func(b *testing.B) {
			c, reqs := benchConsumer(b, requests, depth)
			probes := meanProbes(reqs, func(hs []routing.SeqHash) int {
				s, _, _ := search(c, hs, o, 0)
				return s.probes
			})
			rounds := meanProbes(reqs, func(hs []routing.SeqHash) int {
				s, _, _ := search(c, hs, o, 0)
				return s.rounds
			})
			now := benchNow
			reportLatencies(b, timeEach(b, reqs, func(hs []routing.SeqHash) {
				if _, _, ok := c.Best(domain, hs, now, o, 0); !ok && depth != nil && depth(0, 0) > 0 {
					b.Fatal("no lane chosen though one holds the request")
				}
			}))
			b.ReportMetric(probes, "probes/query")
			b.ReportMetric(rounds, "rounds/query")
		})
	}
	for _, bc := range queryCases {
		run(bc.name, bc.requests, bc.depth, flat)
	}
	run("mixed-depths/4096-requests/at-distances", 4096, nil, atDistances)
}

// atDistances is the objective of lanes whose DCs are a round trip
// further off each: lane dc-k's intercept is -10k.
var atDistances = Objective{Slope: 3.2, Intercept: func(v LaneView) (float64, bool) {
	return -10 * float64(v.Pool.DC[0]-'a'), true
}}

// meanProbes is the mean of probes over the first 256 requests.
func meanProbes(reqs [][]routing.SeqHash, probes func([]routing.SeqHash) int) float64 {
	n := min(len(reqs), 256)
	total := 0
	for _, hs := range reqs[:n] {
		total += probes(hs)
	}
	return float64(total) / float64(n)
}

// timeEach runs query on the requests in turn for the benchmark's
// iterations and returns each call's latency.
func timeEach(b *testing.B, reqs [][]routing.SeqHash, query func([]routing.SeqHash)) []time.Duration {
	lat := make([]time.Duration, 0, 1<<20)
	i := 0
	for b.Loop() {
		hs := reqs[i%len(reqs)]
		i++
		start := time.Now()
		query(hs)
		lat = append(lat, time.Since(start))
	}
	return lat
}

// BenchmarkProbeCost measures one filter lookup issued back to back with
// others that do not depend on it: the first 20 blocks of a request on
// each of the 16 lanes, for one repeated request (hot) and for 4,096
// requests (cold), by Contains one at a time and by filter.HitAll over
// all 320 at once (batched). It is the floor under a cold prefix query,
// which cannot overlap its probes better than independent lookups do.
func BenchmarkProbeCost(b *testing.B) {
	for _, bc := range []struct {
		name     string
		requests int
		batched  bool
	}{{"hot", 1, false}, {"cold", 4096, false}, {"hot-batched", 1, true}, {"cold-batched", 4096, true}} {
		b.Run(bc.name, func(b *testing.B) {
			c, reqs := benchConsumer(b, bc.requests, nil)
			var fs []*filter.Cuckoo
			for _, e := range c.lanes.Load().byDomain[domain] {
				fs = append(fs, e.lane.f.(*filter.Cuckoo))
			}
			ps := make([]filter.Probe, 20*len(fs))
			got := make([]uint64, len(ps))
			probes, hits, i := 0, 0, 0
			for b.Loop() {
				hs := reqs[i%len(reqs)]
				i++
				if bc.batched {
					k := 0
					for _, f := range fs {
						for _, h := range hs[:20] {
							f.LocateInto(&ps[k], h)
							k++
						}
					}
					filter.HitAll(ps, got)
					for _, g := range got {
						hits += int(g)
					}
					probes += len(ps)
					continue
				}
				for _, f := range fs {
					for _, h := range hs[:20] {
						if f.Contains(h) {
							hits++
						}
					}
					probes += 20
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(probes), "ns/probe")
			b.ReportMetric(float64(hits)/float64(max(probes, 1)), "hit-ratio")
		})
	}
}

// benchNoiseFloor times a fixed computation calibrated to take about as
// long as the hot query's median, the same way: the distance between its
// p50 and p99 is what the machine adds to any computation of that length
// (interrupts, the hypervisor, other tenants), against which the query's
// own tail is judged.
func benchNoiseFloor(b *testing.B, target time.Duration) {
	if target <= 0 {
		b.Skip("no hot query median to calibrate against")
	}
	// Calibrate on the fastest of several timed runs, which excludes
	// runs that were interrupted.
	const probe = 1 << 12
	var sink uint64
	per := math.Inf(1)
	for range 50 {
		start := time.Now()
		sink += spin(probe)
		per = min(per, float64(time.Since(start))/probe)
	}
	n := int(float64(target) / per)
	lat := make([]time.Duration, 0, 1<<20)
	for b.Loop() {
		start := time.Now()
		sink += spin(n)
		lat = append(lat, time.Since(start))
	}
	reportLatencies(b, lat)
	if sink == 42 {
		b.Log(sink)
	}
}

// spin runs n steps of a linear congruential generator, a dependent chain
// of multiply-adds the compiler cannot shorten.
func spin(n int) uint64 {
	x := uint64(1)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// BenchmarkQueryDuringApply measures query latency while another
// goroutine applies real deltas (8 blocks inserted, then removed) to every
// lane under its write lock as fast as it can: the worst case of the
// RWMutex-per-lane design.
func BenchmarkQueryDuringApply(b *testing.B) {
	c, reqs := benchConsumer(b, 4096, nil)
	srcs := sources(b, c)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var applied int
	wg.Go(func() { applied = applyLoop(ctx, c, srcs) })
	dst := make([]Result, 0, benchLanes)
	now := benchNow
	lat := make([]time.Duration, 0, 1<<20)
	i := 0
	for b.Loop() {
		start := time.Now()
		dst = c.Query(dst[:0], domain, reqs[i%len(reqs)], now)
		lat = append(lat, time.Since(start))
		i++
	}
	cancel()
	wg.Wait()
	reportLatencies(b, lat)
	b.ReportMetric(float64(applied)/b.Elapsed().Seconds(), "deltas/s")
}

// sources returns, per lane, a tracked copy of its filter to cut deltas
// from.
func sources(b *testing.B, c *Consumer) []*filter.Cuckoo {
	var out []*filter.Cuckoo
	for _, e := range c.lanes.Load().byDomain[domain] {
		data, _ := e.lane.f.MarshalBinary()
		f, err := filter.DecodeCuckoo(data)
		if err != nil {
			b.Fatal(err)
		}
		f.TrackChanges()
		out = append(out, f)
	}
	return out
}

// applyLoop applies deltas to every lane until ctx ends and returns how
// many it applied.
func applyLoop(ctx context.Context, c *Consumer, srcs []*filter.Cuckoo) int {
	rng := rand.New(rand.NewPCG(7, 7))
	lanes := c.lanes.Load().byDomain[domain]
	n := 0
	for ctx.Err() == nil {
		for k, e := range lanes {
			hs := chain(rng, 8)
			for _, h := range hs {
				_ = srcs[k].Insert(h)
			}
			applyLocked(e.lane, srcs[k].TakeChanges())
			for _, h := range hs {
				_ = srcs[k].Delete(h)
			}
			applyLocked(e.lane, srcs[k].TakeChanges())
			n += 2
		}
	}
	return n
}

// applyLocked applies d to l the way a lane's goroutine does.
func applyLocked(l *Lane, d filter.Delta) {
	l.mu.Lock()
	_ = l.f.Apply(d)
	l.mu.Unlock()
}

// BenchmarkApplyLocked is the RWMutex design's cost per delta: apply 8
// inserted blocks' images to a 2^19-bucket filter under the write lock.
func BenchmarkApplyLocked(b *testing.B) {
	c, _ := benchConsumer(b, 1, nil)
	src := sources(b, c)[0]
	l := c.lanes.Load().byDomain[domain][0].lane
	rng := rand.New(rand.NewPCG(8, 8))
	for b.Loop() {
		hs := chain(rng, 8)
		for _, h := range hs {
			_ = src.Insert(h)
		}
		applyLocked(l, src.TakeChanges())
		for _, h := range hs {
			_ = src.Delete(h)
		}
		applyLocked(l, src.TakeChanges())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/delta")
}

// BenchmarkCopyOnWriteClone is the floor of a whole-filter copy-on-write
// design's cost per delta: one copy of a 2^19-bucket (4 MiB) filter, here
// through its encoding, before any image is applied.
func BenchmarkCopyOnWriteClone(b *testing.B) {
	c, _ := benchConsumer(b, 1, nil)
	f := c.lanes.Load().byDomain[domain][0].lane.f
	for b.Loop() {
		data, _ := f.MarshalBinary()
		if _, err := filter.DecodeCuckoo(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/delta")
}
