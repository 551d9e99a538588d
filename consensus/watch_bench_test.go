package consensus

import (
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// BenchmarkOwnershipSnapshot measures OwnershipSnapshot over a million
// ownership rows (64 ranks of 16,384 blocks): the time it holds the FSM's
// read lock, during which apply waits. It reports ms per snapshot and ns
// per row.
func BenchmarkOwnershipSnapshot(b *testing.B) {
	const ranks, perRank = 64, 1 << 14
	st := NewMemState()
	for r := range ranks {
		w := routing.Worker{ID: routing.WorkerID(r + 1)}
		for i := range perRank {
			seq := routing.SeqHash(uint64(r)<<32 | uint64(i))
			st.PutBlock(w, routing.EngineHash(i), seq)
			st.SetTiers(w, seq, 1)
		}
	}
	f := NewFSM(st, nil, nil)
	rows := 0
	for b.Loop() {
		rows = f.OwnershipSnapshot().Rows()
	}
	if rows != ranks*perRank {
		b.Fatalf("%d rows, want %d", rows, ranks*perRank)
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/1e6, "ms/snapshot")
	b.ReportMetric(perOp/float64(rows), "ns/row")
}

// BenchmarkOwnershipRecord measures the apply path's hook alone: recording
// 4,096 stored hashes over 64 ranks (one KV-events entry of the
// KVEventsThroughRaft workload) and sealing them into a batch, with the
// ring at its bound.
func BenchmarkOwnershipRecord(b *testing.B) {
	l := newOwnershipLog(0)
	idx := uint64(0)
	for b.Loop() {
		idx++
		for r := range 64 {
			w := routing.Worker{ID: routing.WorkerID(r + 1)}
			for i := range 64 {
				l.stored(w, routing.SeqHash(i))
			}
		}
		l.seal(idx)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/block")
}

// BenchmarkSessionRecord measures the session hook of the apply path: one
// bound key hashed and sealed into its entry's batch, the shape of a bind
// entry, with the ring at its bound.
func BenchmarkSessionRecord(b *testing.B) {
	l := newOwnershipLog(0)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("session-%016d", i)
	}
	idx := uint64(0)
	for b.Loop() {
		idx++
		l.sessionBound(keys[idx%uint64(len(keys))])
		l.seal(idx)
	}
}
