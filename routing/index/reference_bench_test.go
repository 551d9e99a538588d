package index

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// The Reference benchmarks measure the naive design the exact index is
// checked against in the property tests (plain Go maps per worker, a prefix
// walk per worker per query) on the same 1,032,000-pair fleet, so that
// docs/benchmarks.md can put each exact-index figure beside the obvious
// alternative measured in the same run.

var (
	refOnce    sync.Once
	refFleet   *refIndex
	refBytesPP float64
)

func buildRefFleet(tb testing.TB) *refIndex {
	refOnce.Do(func() {
		r := rand.New(rand.NewPCG(1, 2))
		evs := make([]routing.Event, 0, benchWorkers*benchSeqs)
		for w := range benchWorkers {
			for s := range benchSeqs {
				evs = append(evs, storedEvent(routing.Worker{ID: routing.WorkerID(w + 1)}, uint64(s+1), fleetLocals(r, w, s)))
			}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ref := &refIndex{ws: map[routing.Worker]*refWorker{}}
		for i := range evs {
			if err := ref.apply(&evs[i]); err != nil {
				tb.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(evs)
		refFleet = ref
		refBytesPP = float64(after.HeapAlloc-before.HeapAlloc) / float64(benchWorkers*benchSeqs*benchSeqLen)
	})
	return refFleet
}

func BenchmarkReferenceMemory(b *testing.B) {
	buildRefFleet(b)
	for b.Loop() {
	}
	b.ReportMetric(refBytesPP, "B/pair")
}

func BenchmarkReferenceFindMatchesHit(b *testing.B) {
	ref := buildRefFleet(b)
	f := buildFleet(b)
	i := 0
	var got []routing.Match
	for b.Loop() {
		got = ref.find(f.queries[i%len(f.queries)])
		i++
	}
	if len(got) != benchGroup {
		b.Fatalf("%d matches, want %d", len(got), benchGroup)
	}
}
