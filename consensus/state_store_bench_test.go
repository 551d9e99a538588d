package consensus

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// BenchmarkApplyKVEventsState applies one KV-events entry (16 events of 4
// blocks, one rank) per iteration to an FSM over a MemState and over a
// StoreState on an in-memory file system, so the figure is the cost of
// mirroring and committing, without disk latency.
func BenchmarkApplyKVEventsState(b *testing.B) {
	for _, tc := range []struct {
		name    string
		durable bool
	}{{"mem", false}, {"store", true}} {
		b.Run(tc.name, func(b *testing.B) {
			f := NewFSM(nil, nil, nil)
			if tc.durable {
				f, _, _ = openStoreFSM(b, vfs.NewMem(), "fsm")
			}
			w := routing.Worker{ID: 1}
			idx, id := uint64(0), uint64(1)
			for b.Loop() {
				b.StopTimer()
				data, err := Encode(&kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, id, 16, id)}})
				if err != nil {
					b.Fatal(err)
				}
				idx++
				id += 16
				b.StartTimer()
				f.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16*4), "ns/block")
		})
	}
}
