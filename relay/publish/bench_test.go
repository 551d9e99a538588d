package publish

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// wireOverhead is the per-message cost below protobuf: gRPC's 5-byte
// length prefix and one 9-byte HTTP/2 DATA frame header.
const wireOverhead = 5 + 9

// synthPool is a pool of 8 ranks whose block ownership a synthetic event
// stream mutates: 60% stores (half of them blocks another rank holds, which
// change only reference counts), 40% removals of held blocks.
type synthPool struct {
	rng      *rand.Rand
	held     [8][]routing.SeqHash
	noRemove bool
}

// event returns one block event as a change.
func (s *synthPool) event() producer.Change {
	r := s.rng.IntN(len(s.held))
	w := routing.Worker{ID: routing.WorkerID(r + 1)}
	switch x := s.rng.IntN(10); {
	case x < 4 && len(s.held[r]) > 0 && !s.noRemove:
		k := s.rng.IntN(len(s.held[r]))
		h := s.held[r][k]
		s.held[r][k] = s.held[r][len(s.held[r])-1]
		s.held[r] = s.held[r][:len(s.held[r])-1]
		return producer.Change{Kind: producer.Removed, Worker: w, Hashes: []routing.SeqHash{h}}
	case x < 7:
		o := s.held[s.rng.IntN(len(s.held))]
		if len(o) > 0 {
			h := o[s.rng.IntN(len(o))]
			s.held[r] = append(s.held[r], h)
			return producer.Change{Kind: producer.Stored, Worker: w, Hashes: []routing.SeqHash{h}}
		}
	}
	h := routing.SeqHash(s.rng.Uint64())
	s.held[r] = append(s.held[r], h)
	return producer.Change{Kind: producer.Stored, Worker: w, Hashes: []routing.SeqHash{h}}
}

// fill applies n events without removals in batches of 1,000, uncounted.
func (s *synthPool) fill(b *testing.B, p *producer.Producer, n int) {
	s.noRemove = true
	defer func() { s.noRemove = false }()
	for n > 0 {
		batch := producer.Batch{}
		for range min(n, 1000) {
			batch.Changes = append(batch.Changes, s.event())
		}
		n -= len(batch.Changes)
		if err := p.Apply(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWANBytes reports the wire bytes of the deltas a pool publishes
// per 1,000 block events (= bytes/s per 1,000 events/s), for each summary
// kind and several publication batch sizes, on a pool sized for 2^20
// blocks (a 2^19-bucket cuckoo filter) holding ~180k blocks (metric
// "blocks"); beside it the wire size of one full snapshot and of one
// heartbeat. A Bloom summary cannot delete, so it is rebuilt and re-sent
// whole when removed blocks reach a share of its entries: the benchmark
// goes on applying events after the timed part until the first rebuild
// (the filter after the fill has no stale entries, as after any rebuild,
// so that is the steady interval), and reports the events per rebuild and
// the snapshot bytes they amortise to per 1,000 events (rebuildB/1k-events),
// which add to the deltas' bytes.
func BenchmarkWANBytes(b *testing.B) {
	for _, kind := range []filter.Kind{filter.KindCuckoo, filter.KindCuckooCompact, filter.KindBloom} {
		for _, per := range []int{1, 16, 64, 256} {
			b.Run(fmt.Sprintf("kind=%v/events-per-delta=%d", kind, per), func(b *testing.B) { benchWANBytes(b, kind, per) })
		}
	}
}

// benchWANBytes is one case of BenchmarkWANBytes.
func benchWANBytes(b *testing.B, kind filter.Kind, per int) {
	p, err := producer.New(testPool, producer.Config{Filter: filter.Config{Kind: kind, Capacity: 1 << 20, Seed: 1}, QueueLen: 1 << 16},
		rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		b.Fatal(err)
	}
	s := &synthPool{rng: rand.New(rand.NewPCG(2, 2))}
	s.fill(b, p, 600_000)
	f, _ := p.Subscribe()
	snapshot := snapshotWireBytes(f)
	var bytes, events, deltas, perRebuild int
	batch := func() {
		bt := producer.Batch{}
		for range per {
			bt.Changes = append(bt.Changes, s.event())
		}
		if err := p.Apply(bt); err != nil {
			b.Fatal(err)
		}
		events += per
		if perRebuild == 0 && p.Stats().Rebuilds > 0 {
			perRebuild = events
		}
	}
	for b.Loop() {
		for range 1000 / per {
			batch()
			if f.Err() != nil {
				// A rebuild ended the feed: its deltas so far count,
				// and the subscriber takes the new snapshot.
				bytes, deltas = drainWire(f, bytes, deltas)
				f, _ = p.Subscribe()
			}
		}
		bytes, deltas = drainWire(f, bytes, deltas)
	}
	f.Close()
	timed, blocks := events, p.Stats().Blocks
	for kind == filter.KindBloom && perRebuild == 0 && events < 20_000_000 {
		batch()
	}
	p.SetLoad(producer.Load{Engines: 8, ActiveRequests: 120, PrefillTokens: 40000, DecodeBlocks: 9000, Utilization: 0.7})
	hb := producer.Update{Kind: producer.UpdateHeartbeat, Epoch: 1 << 63, Seq: 1 << 40, Load: producer.Load{Engines: 8, ActiveRequests: 120, PrefillTokens: 40000, DecodeBlocks: 9000, Utilization: 0.7}, Entries: 400000, At: time.Unix(0, 0)}
	b.ReportMetric(float64(bytes)*1000/float64(timed), "wireB/1k-events")
	b.ReportMetric(float64(bytes)/float64(max(deltas, 1)), "wireB/delta")
	b.ReportMetric(float64(snapshot), "snapshotB")
	if perRebuild > 0 {
		b.ReportMetric(float64(perRebuild), "events/rebuild")
		b.ReportMetric(float64(snapshot)*1000/float64(perRebuild), "rebuildB/1k-events")
	}
	b.ReportMetric(float64(proto.Size(updateMessage(hb))+wireOverhead), "heartbeatB")
	b.ReportMetric(float64(blocks), "blocks")
}

// drainWire adds the wire bytes of f's queued updates to bytes and their
// number to deltas.
func drainWire(f *producer.Feed, bytes, deltas int) (int, int) {
	for len(f.Updates()) > 0 {
		u := <-f.Updates()
		bytes += proto.Size(updateMessage(u)) + wireOverhead
		deltas++
	}
	return bytes, deltas
}

// snapshotWireBytes is the wire size of f's snapshot in the server's
// chunks.
func snapshotWireBytes(f *producer.Feed) int {
	n := 0
	for _, m := range snapshotMessages(f, DefaultChunkBytes) {
		n += proto.Size(m) + wireOverhead
	}
	return n
}
