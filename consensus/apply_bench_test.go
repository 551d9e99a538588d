package consensus

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// steadyBatch is a batch of n events of rank w from firstID: the first
// half store 4-block chains (engine ids derived from firstID, as kvBatch
// does), the second half remove the blocks the first half of the batch
// depth batches earlier stored, so each rank holds a bounded set of
// blocks, like an engine whose cache is full.
func steadyBatch(w routing.Worker, firstID uint64, n int, depth uint64) []routing.Event {
	evs := kvEvents(w, firstID, n/2, firstID)
	old := firstID - depth*uint64(n)
	for e := range uint64(n - n/2) {
		ev := routing.Event{Worker: w, ID: firstID + uint64(n/2) + e, Kind: routing.EventRemoved, Tier: routing.TierDevice}
		for b := range uint64(4) {
			ev.Removed = append(ev.Removed, routing.EngineHash(old<<32|e<<8|b))
		}
		evs = append(evs, ev)
	}
	return evs
}

// workload names how benchmark batches are built: grow only stores new
// blocks (every table and index grows for the whole run); steady removes
// as many blocks as it stores once each rank holds depth batches.
type workload struct {
	name  string
	batch func(w routing.Worker, firstID uint64, n int) []routing.Event
}

var (
	growWorkload = workload{"grow", func(w routing.Worker, id uint64, n int) []routing.Event {
		return kvEvents(w, id, n, id)
	}}
	steadyWorkload = workload{"steady", func(w routing.Worker, id uint64, n int) []routing.Event {
		return steadyBatch(w, id, n, 32)
	}}
)

// benchRanks and benchPerBatch shape one round of the benchmarks: 64
// ranks, one batch of 16 events each, one 1,024-event entry.
const benchRanks, benchPerBatch = 64, 16

// entryRound returns one round's entry and advances next, the ranks'
// next event ids.
func entryRound(wl workload, next []uint64) *kvrpb.RaftKVEvents {
	c := &kvrpb.RaftKVEvents{}
	for r := range next {
		w := routing.Worker{ID: routing.WorkerID(r + 1)}
		c.Batches = append(c.Batches, wire.EncodeBatch(w, 1, wl.batch(w, next[r], benchPerBatch)))
		next[r] += benchPerBatch
	}
	return c
}

// firstIDs returns benchRanks next-event ids of 1.
func firstIDs() []uint64 {
	next := make([]uint64, benchRanks)
	for i := range next {
		next[i] = 1
	}
	return next
}

// BenchmarkApplyKVEventsStages splits one node's apply of 1,024-event
// KV-events entries (64 ranks × 16 events of 4 blocks) into its stages:
// decode (entry bytes to routing events; decode-proto is the protobuf
// path it replaced), index (index.Exact.Apply of decoded events), and the
// whole FSM apply over a MemState and over a StoreState on an in-memory
// file system. The FSM's own tables cost the difference. A 3-node cluster
// in one process applies every entry three times, so its ceiling is a
// third of the fsm stage's events/s per core. Entries are built before
// the timer starts: stateful stages replay benchRounds rounds, then start
// over on a fresh FSM or index with the timer stopped.
func BenchmarkApplyKVEventsStages(b *testing.B) {
	for _, wl := range []workload{growWorkload, steadyWorkload} {
		rounds := buildRounds(b, wl)
		stateless := func(st stage) func() stage { return func() stage { return st } }
		b.Run(wl.name+"/decode-proto", func(b *testing.B) { benchStage(b, rounds, stateless(stageDecodeProto)) })
		b.Run(wl.name+"/decode", func(b *testing.B) { benchStage(b, rounds, stateless(stageDecode)) })
		b.Run(wl.name+"/index", func(b *testing.B) {
			benchStage(b, rounds, func() stage { return stageIndex(index.NewExact()) })
		})
		b.Run(wl.name+"/fsm-mem", func(b *testing.B) {
			benchStage(b, rounds, func() stage { return stageFSM(NewFSM(nil, nil, nil)) })
		})
		b.Run(wl.name+"/fsm-store", func(b *testing.B) {
			benchStage(b, rounds, func() stage {
				f, _, _ := openStoreFSM(b, vfs.NewMem(), "fsm")
				return stageFSM(f)
			})
		})
	}
}

// benchRounds is how many entries a stage benchmark replays before it
// starts over: enough for the steady workload to reach its bound.
const benchRounds = 160

// round is one prepared entry: its bytes and its decoded events.
type round struct {
	data   []byte
	events [][]routing.Event
}

// buildRounds prepares benchRounds consecutive entries of a workload.
func buildRounds(b *testing.B, wl workload) []round {
	next := firstIDs()
	out := make([]round, benchRounds)
	for i := range out {
		c := entryRound(wl, next)
		data, err := Encode(c)
		if err != nil {
			b.Fatal(err)
		}
		out[i].data = data
		for _, batch := range c.Batches {
			_, evs, _ := wire.BatchEvents(batch)
			out[i].events = append(out[i].events, evs)
		}
	}
	return out
}

// stage runs one entry at a raft index.
type stage func(b *testing.B, idx uint64, r *round)

// stageDecode is the apply path's decoder.
func stageDecode(b *testing.B, _ uint64, r *round) {
	if _, ok := decodeKVEventsFast(r.data[headerBytes:]); !ok {
		b.Fatal("fast decoder refused a canonical entry")
	}
}

// stageDecodeProto is the protobuf path the fast decoder replaces.
func stageDecodeProto(b *testing.B, _ uint64, r *round) {
	d, err := decode(r.data)
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range d.m.(*kvrpb.RaftKVEvents).Batches {
		if _, _, err := wire.BatchEvents(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func stageIndex(x *index.Exact) stage {
	return func(_ *testing.B, _ uint64, r *round) {
		for _, evs := range r.events {
			for i := range evs {
				ev := evs[i]
				_ = x.Apply(&ev)
			}
		}
	}
}

func stageFSM(f *FSM) stage {
	return func(_ *testing.B, idx uint64, r *round) {
		f.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: r.data}})
	}
}

// benchStage replays rounds through the stages fresh returns, reporting
// ns/event and events/s.
func benchStage(b *testing.B, rounds []round, fresh func() stage) {
	st := fresh()
	i, events := 0, 0
	for b.Loop() {
		if i == len(rounds) {
			b.StopTimer()
			st, i = fresh(), 0
			b.StartTimer()
		}
		st(b, uint64(i+1), &rounds[i])
		i++
		events += benchRanks * benchPerBatch
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
