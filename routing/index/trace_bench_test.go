package index

import (
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/traces"
)

// Trace replay shape: 32 workers of 2,048 blocks each. The Mooncake
// synthetic trace stores about 122,000 blocks per pass, so the fleet
// evicts continuously once warm.
const (
	replayWorkers  = 32
	replayCapacity = 2048
)

// engineModel is a simulated engine's prefix cache: which sequence hashes
// it holds under which engine ids, evicted first-in first-out at capacity,
// and the event ids it has published.
type engineModel struct {
	w      routing.Worker
	held   map[routing.SeqHash]routing.EngineHash
	fifo   []routing.SeqHash
	nextID routing.EngineHash
	event  uint64
}

// serve stores the request's blocks from the first one it does not hold
// (engines recompute from there) and evicts down to capacity, returning
// the KV events it publishes.
func (m *engineModel) serve(locals []routing.LocalHash, hs []routing.SeqHash) []routing.Event {
	first := 0
	for first < len(hs) {
		if _, ok := m.held[hs[first]]; !ok {
			break
		}
		first++
	}
	if first == len(hs) {
		return nil
	}
	m.event++
	st := routing.Event{Worker: m.w, ID: m.event, Kind: routing.EventStored, Blocks: make([]routing.StoredBlock, 0, len(hs)-first)}
	if first > 0 {
		st.Parent, st.HasParent = m.held[hs[first-1]], true
	}
	for i := first; i < len(hs); i++ {
		id, ok := m.held[hs[i]]
		if !ok {
			m.nextID++
			id = m.nextID
			m.held[hs[i]] = id
			m.fifo = append(m.fifo, hs[i])
		}
		st.Blocks = append(st.Blocks, routing.StoredBlock{Engine: id, Local: locals[i]})
	}
	evs := []routing.Event{st}
	if len(m.held) <= replayCapacity {
		return evs
	}
	m.event++
	rm := routing.Event{Worker: m.w, ID: m.event, Kind: routing.EventRemoved}
	for len(m.held) > replayCapacity {
		seq := m.fifo[0]
		m.fifo = m.fifo[1:]
		rm.Removed = append(rm.Removed, m.held[seq])
		delete(m.held, seq)
	}
	return append(evs, rm)
}

// replayRequest is one trace request's hashes for one pass.
type replayRequest struct {
	locals []routing.LocalHash
	hashes []routing.SeqHash
}

// replayPass derives per-block local hashes from the trace's hash ids,
// salted by the pass so that every pass brings new content.
func replayPass(reqs []traces.Request, pass uint64) []replayRequest {
	out := make([]replayRequest, len(reqs))
	for i, r := range reqs {
		ls := make([]routing.LocalHash, len(r.HashIDs))
		for j, id := range r.HashIDs {
			ls[j] = routing.LocalHash(mix(id ^ pass<<40))
		}
		out[i] = replayRequest{locals: ls, hashes: routing.SeqHashes(nil, ls)}
	}
	return out
}

// BenchmarkTraceReplay replays the Mooncake synthetic trace through the
// exact index: a routing goroutine runs FindMatches for each request,
// picks the worker with the deepest device match (else spreads by request
// number), and lets that worker's engine model publish stored and removed
// events, which an applier goroutine applies concurrently. One iteration
// is one pass over the trace (3,993 requests). ops/s counts lookups plus
// events; p99-ns is the FindMatches latency.
func BenchmarkTraceReplay(b *testing.B) {
	reqs, err := traces.ReadBytes(traces.MooncakeSynthetic)
	if err != nil {
		b.Fatal(err)
	}
	x := NewExact()
	engines := make([]*engineModel, replayWorkers)
	for i := range engines {
		engines[i] = &engineModel{w: routing.Worker{ID: routing.WorkerID(i + 1)}, held: map[routing.SeqHash]routing.EngineHash{}}
	}
	var lat []time.Duration
	var ops, hitBlocks, blocks int
	var elapsed time.Duration
	pass := uint64(0)
	for b.Loop() {
		b.StopTimer()
		rs := replayPass(reqs, pass)
		pass++
		b.StartTimer()
		start := time.Now()
		n, h, bl, l := replayOnce(b, x, engines, rs)
		elapsed += time.Since(start)
		ops, hitBlocks, blocks = ops+n, hitBlocks+h, blocks+bl
		lat = append(lat, l...)
	}
	b.ReportMetric(float64(ops)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(hitBlocks)/float64(blocks), "hit-ratio")
	reportP99(b, lat, "p99-ns")
}

// replayOnce replays one pass and returns the operations done, the device
// blocks matched on the chosen workers, the blocks requested and the
// FindMatches latencies.
func replayOnce(b *testing.B, x *Exact, engines []*engineModel, rs []replayRequest) (int, int, int, []time.Duration) {
	batches := make(chan []routing.Event, 1024)
	var wg sync.WaitGroup
	events := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for evs := range batches {
			for i := range evs {
				if err := x.Apply(&evs[i]); err != nil {
					b.Error(err)
				}
				events++
			}
		}
	}()
	lat := make([]time.Duration, 0, len(rs))
	dst := make([]routing.Match, 0, replayWorkers)
	hits, blocks := 0, 0
	for i, r := range rs {
		t0 := time.Now()
		dst = x.FindMatches(r.hashes, dst[:0])
		lat = append(lat, time.Since(t0))
		pick, depth := i%replayWorkers, int32(0)
		for _, m := range dst {
			if m.Device > depth {
				pick, depth = int(m.Worker.ID-1), m.Device
			}
		}
		hits += int(depth)
		blocks += len(r.hashes)
		if evs := engines[pick].serve(r.locals, r.hashes); evs != nil {
			batches <- evs
		}
	}
	close(batches)
	wg.Wait()
	return len(rs) + events, hits, blocks, lat
}
