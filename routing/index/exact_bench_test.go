package index

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// Fleet shape of the exact-index benchmarks: 1,000 workers in groups of 8;
// each group shares 8 system prompts of 4 blocks, and each worker holds 50
// 24-block sequences (one of its group's prompts plus 20 blocks of its
// own). That is 1,032,000 (worker, block) pairs over 1,004,000 blocks.
const (
	benchWorkers   = 1000
	benchGroup     = 8
	benchPrompts   = 8
	benchPromptLen = 4
	benchSeqs      = 50
	benchSeqLen    = 24
)

// benchFleet is the built index and what the benchmarks query it with.
type benchFleet struct {
	x          *Exact
	queries    [][]routing.SeqHash
	pairs      int
	bytesPerPr float64
	cursors    []uint64
}

var (
	fleetOnce sync.Once
	fleet     benchFleet
)

// fleetLocals returns the local hashes of worker w's sequence s.
func fleetLocals(r *rand.Rand, w, s int) []routing.LocalHash {
	g, p := w/benchGroup, s%benchPrompts
	ls := make([]routing.LocalHash, 0, benchSeqLen)
	for i := range benchPromptLen {
		ls = append(ls, routing.LocalHash(uint64(g)<<32|uint64(p)<<8|uint64(i)))
	}
	for len(ls) < benchSeqLen {
		ls = append(ls, routing.LocalHash(r.Uint64()))
	}
	return ls
}

// storedEvent builds a parentless stored event whose engine ids are the
// blocks' sequence hashes, as content-addressed engines do.
func storedEvent(w routing.Worker, id uint64, locals []routing.LocalHash) routing.Event {
	hs := routing.SeqHashes(nil, locals)
	ev := routing.Event{Worker: w, ID: id, Kind: routing.EventStored, Blocks: make([]routing.StoredBlock, len(locals))}
	for i, l := range locals {
		ev.Blocks[i] = routing.StoredBlock{Engine: routing.EngineHash(hs[i]), Local: l}
	}
	return ev
}

// buildFleet builds the index once and measures its heap growth. Events
// are generated before the first heap reading so that only the index is
// counted.
func buildFleet(tb testing.TB) *benchFleet {
	fleetOnce.Do(func() {
		r := rand.New(rand.NewPCG(1, 2))
		evs := make([]routing.Event, 0, benchWorkers*benchSeqs)
		for w := range benchWorkers {
			for s := range benchSeqs {
				locals := fleetLocals(r, w, s)
				evs = append(evs, storedEvent(routing.Worker{ID: routing.WorkerID(w + 1)}, uint64(s+1), locals))
				if s%5 == 0 {
					fleet.queries = append(fleet.queries, routing.SeqHashes(nil, locals))
				}
			}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := NewExact()
		for i := range evs {
			if err := x.Apply(&evs[i]); err != nil {
				tb.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(evs)
		fleet.x = x
		fleet.pairs = x.Stats().Pairs
		fleet.bytesPerPr = float64(after.HeapAlloc-before.HeapAlloc) / float64(fleet.pairs)
		fleet.cursors = make([]uint64, benchWorkers)
		for i := range fleet.cursors {
			fleet.cursors[i] = benchSeqs
		}
	})
	return &fleet
}

// cpuMeter reports the CPU time of the benchmark's thread per unit.
type cpuMeter struct {
	start  time.Duration
	ok     bool
	unlock func()
}

func startCPU() cpuMeter {
	unlock := lockThread()
	t, ok := threadCPU()
	return cpuMeter{start: t, ok: ok, unlock: unlock}
}

// report reports CPU nanoseconds per unit as metric.
func (c cpuMeter) report(b *testing.B, units float64, metric string) {
	t, ok := threadCPU()
	c.unlock()
	if c.ok && ok && units > 0 {
		b.ReportMetric(float64((t-c.start).Nanoseconds())/units, metric)
	}
}

// reportP99 reports the 99th percentile of the samples in nanoseconds.
func reportP99(b *testing.B, samples []time.Duration, unit string) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), unit)
}

// BenchmarkExactMemory reports the heap bytes per (worker, block) pair of
// the 1,032,000-pair fleet, engine-id maps included.
func BenchmarkExactMemory(b *testing.B) {
	f := buildFleet(b)
	for b.Loop() {
	}
	b.ReportMetric(f.bytesPerPr, "B/pair")
	b.ReportMetric(float64(f.pairs), "pairs")
}

// BenchmarkExactFindMatchesHit queries stored 24-block sequences: a full
// hit on the owner and a 4-block prefix hit on its 7 group peers. Each call
// is timed alone for the p99 (the timer adds about 30-50 ns).
func BenchmarkExactFindMatchesHit(b *testing.B) {
	f := buildFleet(b)
	dst := make([]routing.Match, 0, 64)
	samples := make([]time.Duration, 0, 1<<20)
	i := 0
	cpu := startCPU()
	for b.Loop() {
		q := f.queries[i%len(f.queries)]
		i++
		t0 := time.Now()
		dst = f.x.FindMatches(q, dst[:0])
		if len(samples) < cap(samples) {
			samples = append(samples, time.Since(t0))
		}
	}
	cpu.report(b, float64(i), "cpu-ns/op")
	if len(dst) != benchGroup {
		b.Fatalf("%d matches, want %d", len(dst), benchGroup)
	}
	reportP99(b, samples, "p99-ns")
}

// BenchmarkExactFindMatchesMiss queries a first block nobody holds.
func BenchmarkExactFindMatchesMiss(b *testing.B) {
	f := buildFleet(b)
	r := rand.New(rand.NewPCG(3, 4))
	qs := make([][]routing.SeqHash, 1024)
	for i := range qs {
		qs[i] = []routing.SeqHash{routing.SeqHash(r.Uint64()), 1, 2}
	}
	dst := make([]routing.Match, 0, 8)
	i := 0
	cpu := startCPU()
	for b.Loop() {
		dst = f.x.FindMatches(qs[i&1023], dst[:0])
		i++
	}
	cpu.report(b, float64(i), "cpu-ns/op")
	if len(dst) != 0 {
		b.Fatal("miss matched")
	}
}

// BenchmarkExactStoreRemove stores a fresh 24-block sequence on a worker of
// the full fleet and removes it again, reporting the cost per block of
// each.
func BenchmarkExactStoreRemove(b *testing.B) {
	f := buildFleet(b)
	r := rand.New(rand.NewPCG(5, 6))
	const n = 1024
	type job struct {
		w      int
		st, rm routing.Event
	}
	jobs := make([]job, n)
	for i := range jobs {
		w := r.IntN(benchWorkers)
		ev := storedEvent(routing.Worker{ID: routing.WorkerID(w + 1)}, 0, fleetLocals(r, w, benchSeqs+i))
		rm := routing.Event{Worker: ev.Worker, Kind: routing.EventRemoved}
		for _, bl := range ev.Blocks[benchPromptLen:] {
			rm.Removed = append(rm.Removed, bl.Engine)
		}
		jobs[i] = job{w: w, st: ev, rm: rm}
	}
	var storeT, removeT time.Duration
	var storeN, removeN int
	i := 0
	cpu := startCPU()
	for b.Loop() {
		j := &jobs[i%n]
		i++
		f.cursors[j.w]++
		j.st.ID = f.cursors[j.w]
		t0 := time.Now()
		if err := f.x.Apply(&j.st); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		f.cursors[j.w]++
		j.rm.ID = f.cursors[j.w]
		if err := f.x.Apply(&j.rm); err != nil {
			b.Fatal(err)
		}
		removeT += time.Since(t1)
		storeT += t1.Sub(t0)
		storeN += len(j.st.Blocks)
		removeN += len(j.rm.Removed)
	}
	cpu.report(b, float64(storeN+removeN), "cpu-ns/block")
	b.ReportMetric(float64(storeT.Nanoseconds())/float64(storeN), "store-ns/block")
	b.ReportMetric(float64(removeT.Nanoseconds())/float64(removeN), "remove-ns/block")
}
