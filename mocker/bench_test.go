package mocker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// traceRequests draws n requests shaped like the Mooncake traces: prompts
// of 2k tokens plus an exponential tail (mean total about 15k, capped at
// 190k), a shared prefix from one of a few system prompts, about 150 output
// tokens, Poisson arrivals at rate per second.
func traceRequests(seed uint64, n int, meanPrompt float64, rate float64) []timedReq {
	rng := rand.New(rand.NewPCG(seed, 2))
	reqs := make([]timedReq, 0, n)
	at := time.Duration(0)
	for i := range n {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		prompt := min(2000+int(rng.ExpFloat64()*(meanPrompt-2000)), 190000)
		out := min(1+int(rng.ExpFloat64()*150), 900)
		r := hashed(fmt.Sprint("r", i), i, prompt, out, DefaultBlockSize)
		family := uint64(rng.IntN(8))
		for k := range min(len(r.Locals), 30) {
			r.Locals[k] = routing.LocalHash(family<<40 | uint64(k))
		}
		reqs = append(reqs, timedReq{at: at, req: r})
	}
	return reqs
}

// BenchmarkEngine16k simulates 1,000 requests of 16k-token prompts through
// one engine at a load near its capacity and reports simulated requests per
// second of wall time.
func BenchmarkEngine16k(b *testing.B) {
	reqs := make([]timedReq, 1000)
	rng := rand.New(rand.NewPCG(1, 1))
	at := time.Duration(0)
	for i := range reqs {
		at += time.Duration(rng.ExpFloat64() / 1.3 * float64(time.Second))
		r := hashed(fmt.Sprint("r", i), i, 16384, 150, DefaultBlockSize)
		for k := range 32 {
			r.Locals[k] = routing.LocalHash(uint64(rng.IntN(4))<<40 | uint64(k))
		}
		reqs[i] = timedReq{at: at, req: r}
	}
	var iters int
	var simulated time.Duration
	start := time.Now()
	for b.Loop() {
		e, _ := New(Config{}, testWorker)
		iters = 0
		if _, err := drive(e, reqs, func(r StepResult) error {
			iters += r.Iterations
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		simulated = e.lastEnd.Sub(t0)
	}
	wall := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(float64(len(reqs))/wall, "sim-req/s")
	b.ReportMetric(simulated.Seconds()/wall, "sim-s/wall-s")
	b.ReportMetric(float64(iters), "iterations")
}

// BenchmarkTrace8Engines replays 4,000 Mooncake-shaped requests (mean prompt
// 15k tokens) through 8 engines, round robin, with a minimal discrete-event
// loop, and reports the wall time of one replay.
func BenchmarkTrace8Engines(b *testing.B) {
	reqs := traceRequests(3, 4000, 15000, 4)
	start := time.Now()
	for b.Loop() {
		engines := make([]*Engine, 8)
		for i := range engines {
			engines[i], _ = New(Config{}, routing.Worker{ID: routing.WorkerID(i)})
		}
		replay(b, engines, reqs)
	}
	wall := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(wall, "wall-s/trace")
	b.ReportMetric(float64(len(reqs))/wall, "sim-req/s")
}

// replay feeds reqs round robin to engines, always processing the earliest
// pending engine event or arrival.
func replay(b *testing.B, engines []*Engine, reqs []timedReq) {
	next := 0
	for {
		ei, et := -1, time.Time{}
		for i, e := range engines {
			if t, ok := e.NextEventTime(); ok && (ei < 0 || t.Before(et)) {
				ei, et = i, t
			}
		}
		if next < len(reqs) && (ei < 0 || !t0.Add(reqs[next].at).After(et)) {
			e := engines[next%len(engines)]
			if err := e.Submit(reqs[next].req, t0.Add(reqs[next].at)); err != nil {
				b.Fatal(err)
			}
			next++
			continue
		}
		if ei < 0 {
			return
		}
		engines[ei].Advance(et)
	}
}
