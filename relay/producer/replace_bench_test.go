package producer

import (
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// BenchmarkResyncIdentical measures what a source resync to an unchanged
// pool of 8 ranks × 4,096 blocks publishes: with a replacing batch, and
// with the delete-everything-then-store batch it replaced. It reports the
// delta bytes and bucket images published per resync.
func BenchmarkResyncIdentical(b *testing.B) {
	for _, tc := range []struct {
		name  string
		build func(m model, index uint64) Batch
	}{
		{name: "replace", build: stateOf},
		{name: "delete_reinsert", build: deleteReinsert},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := newTestProducer(b, 1<<16, 16)
			m := model{}
			for r := range 8 {
				c := Change{Kind: Stored, Worker: routing.Worker{ID: routing.WorkerID(r + 1)}}
				for i := range 4096 {
					c.Hashes = append(c.Hashes, routing.SeqHash(uint64(r*4096+i+1)*0x9E3779B97F4A7C15))
				}
				m.apply(c)
				if err := p.Apply(Batch{Changes: []Change{c}}); err != nil {
					b.Fatal(err)
				}
			}
			before := p.Stats()
			n := 0
			for b.Loop() {
				if err := p.Apply(tc.build(m, 0)); err != nil {
					b.Fatal(err)
				}
				n++
			}
			after := p.Stats()
			b.ReportMetric(float64(after.DeltaBytes-before.DeltaBytes)/float64(n), "delta_bytes/resync")
			b.ReportMetric(float64(after.DeltaImages-before.DeltaImages)/float64(n), "images/resync")
			b.ReportMetric(float64(after.Resyncs-before.Resyncs)/float64(n), "feed_resyncs/resync")
		})
	}
}

// deleteReinsert is the resync batch of a producer without Replace: every
// worker removed, then every block stored.
func deleteReinsert(m model, index uint64) Batch {
	b := Batch{Index: index}
	for w := range m {
		b.Changes = append(b.Changes, Change{Kind: WorkerRemoved, Worker: w})
	}
	b.Changes = append(b.Changes, stateOf(m, index).Changes...)
	return b
}
