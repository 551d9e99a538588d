package fleet

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// Ingestion workload of one rank: 2,000 batches of 4 stored events of 16
// blocks, each event continuing the previous one for 4 events (64-block
// sequences), 128,000 block events in all.
const (
	benchBatches        = 2000
	benchEventsPerBatch = 4
	benchBlocksPerEvent = 16
	benchSeqEvents      = 4
	benchBlocks         = benchBatches * benchEventsPerBatch * benchBlocksPerEvent
)

// benchWorkload returns the batches of worker w, decoded and encoded.
func benchWorkload(tb testing.TB, w routing.Worker) ([][]routing.Event, [][]byte) {
	r := rand.New(rand.NewPCG(uint64(w.ID), 7))
	var batches [][]routing.Event
	var payloads [][]byte
	var parent routing.EngineHash
	id := uint64(0)
	for range benchBatches {
		evs := make([]routing.Event, benchEventsPerBatch)
		for i := range evs {
			id++
			ev := routing.Event{Worker: w, ID: id, Kind: routing.EventStored, Blocks: make([]routing.StoredBlock, benchBlocksPerEvent)}
			if id%benchSeqEvents != 1 {
				ev.Parent, ev.HasParent = parent, true
			}
			for j := range ev.Blocks {
				ev.Blocks[j] = routing.StoredBlock{Engine: routing.EngineHash(r.Uint64()), Local: routing.LocalHash(r.Uint64())}
			}
			parent = ev.Blocks[benchBlocksPerEvent-1].Engine
			evs[i] = ev
		}
		data, err := proto.Marshal(wire.EncodeBatch(w, 1, evs))
		if err != nil {
			tb.Fatal(err)
		}
		batches = append(batches, evs)
		payloads = append(payloads, data)
	}
	return batches, payloads
}

// BenchmarkIngest measures block events per second into the exact index:
// through NATS and the plane (publisher in the same process, embedded
// server), and, for comparison, the same events applied directly, already
// decoded or decoded from the same payloads.
func BenchmarkIngest(b *testing.B) {
	w := routing.Worker{ID: 1}
	batches, payloads := benchWorkload(b, w)
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			x := index.NewExact()
			for _, evs := range batches {
				for i := range evs {
					if err := x.Apply(&evs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(float64(benchBlocks)*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
	})
	b.Run("direct_decode", func(b *testing.B) {
		for b.Loop() {
			x := index.NewExact()
			for _, data := range payloads {
				_, _, evs, err := wire.DecodeBatch(data)
				if err != nil {
					b.Fatal(err)
				}
				for i := range evs {
					if err := x.Apply(&evs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(float64(benchBlocks)*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
	})
	b.Run("nats", benchNATS)
}

// benchNATS registers a fresh engine per iteration (outside the timed
// window), publishes its batches and waits until the index cursor reaches
// the last event.
func benchNATS(b *testing.B) {
	ns := startNATS(b)
	nc, pub := connect(b, ns), connect(b, ns)
	idx := index.NewExact()
	p, err := New(Config{DC: testDC}, nc, idx, metrics.New(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	sub, err := pub.Subscribe("kvr."+testDC+".snapshot.>", emptySnapshot)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	var timed time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		w := routing.Worker{ID: routing.WorkerID(n)}
		_, payloads := benchWorkload(b, w)
		benchRegister(b, pub, p, idx, w)
		b.StartTimer()
		start := time.Now()
		subject := kvrpb.SubjectKV(testDC, uint64(w.ID), 0)
		for _, data := range payloads {
			if err := pub.Publish(subject, data); err != nil {
				b.Fatal(err)
			}
		}
		last := uint64(benchBatches * benchEventsPerBatch)
		for cur, _ := idx.Cursor(w); cur < last; cur, _ = idx.Cursor(w) {
			time.Sleep(100 * time.Microsecond)
		}
		timed += time.Since(start)
		b.StopTimer()
		data, _ := proto.Marshal(&kvrpb.Deregister{EngineId: uint64(w.ID), Incarnation: 1})
		_ = pub.Publish(kvrpb.SubjectDeregister(testDC, uint64(w.ID)), data)
		b.StartTimer()
	}
	if s := p.Stats(); s.Gaps != 0 || s.Dropped != 0 {
		b.Fatalf("lossy run: %+v", s)
	}
	b.ReportMetric(float64(benchBlocks)*float64(n)/timed.Seconds(), "blocks/s")
}

func benchRegister(b *testing.B, pub *nats.Conn, p *Plane, idx *index.Exact, w routing.Worker) {
	c := &kvrpb.WorkerCard{EngineId: uint64(w.ID), DpSize: 1, Model: "m", BlockSize: 16, TotalKvBlocks: 1 << 20,
		MaxNumBatchedTokens: 8192, EndpointUrl: "http://e:1", Checksum: "c", Incarnation: 1}
	data, _ := proto.Marshal(c)
	if err := pub.Publish(kvrpb.SubjectRegister(testDC, uint64(w.ID)), data); err != nil {
		b.Fatal(err)
	}
	for {
		if _, ok := idx.Cursor(w); ok {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// emptySnapshot answers every snapshot request with an empty rank.
func emptySnapshot(m *nats.Msg) {
	var req kvrpb.SnapshotRequest
	if proto.Unmarshal(m.Data, &req) != nil {
		return
	}
	data, _ := proto.Marshal(&kvrpb.SnapshotReply{EngineId: req.EngineId, Rank: req.Rank, Incarnation: 1})
	_ = m.Respond(data)
}
