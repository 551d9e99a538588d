package consensus

import (
	"log/slog"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/store"
)

// startupRanks and startupBlocks shape BenchmarkStartup1M's state: 64
// ranks of 15,625 blocks, 1,000,000 ownership entries.
const startupRanks, startupBlocks = 64, 15_625

// BenchmarkStartup1M measures a durable node's start to ready with
// 1,000,000 ownership entries on the real disk (flushed, so no WAL
// replays): open the FSM store, load every table into memory
// (OpenStoreState) and rebuild the exact index (NewFSM). Raft's own start
// and election are not included; they do not grow with the state.
// Target: 2 s.
func BenchmarkStartup1M(b *testing.B) {
	dir := b.TempDir()
	opts := store.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
	fillStartupStore(b, opts)
	var f *FSM
	for b.Loop() {
		s, err := store.OpenFSM(opts)
		if err != nil {
			b.Fatal(err)
		}
		st, err := OpenStoreState(s)
		if err != nil {
			b.Fatal(err)
		}
		f = NewFSM(st, nil, nil)
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
	if got := f.Index().Stats().Pairs; got != startupRanks*startupBlocks {
		b.Fatalf("index holds %d pairs, want %d", got, startupRanks*startupBlocks)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/start")
}

// fillStartupStore writes the rows the FSM keeps for startupRanks ranks
// of startupBlocks root blocks each (engine block id, ownership, cursor)
// and flushes them.
func fillStartupStore(b *testing.B, opts store.Options) {
	s, err := store.OpenFSM(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	index := uint64(1)
	for r := range uint64(startupRanks) {
		w := routing.Worker{ID: routing.WorkerID(r + 1)}
		for lo := 0; lo < startupBlocks; lo += 5000 {
			bt := s.NewBatch()
			bt.PutCursor(uint64(w.ID), w.Rank, 1)
			for i := lo; i < min(lo+5000, startupBlocks); i++ {
				eh, seq := r<<32|uint64(i), routing.Chain(routing.SeqHash(r), routing.LocalHash(i))
				bt.PutEngineBlock(uint64(w.ID), w.Rank, eh, uint64(seq))
				bt.PutOwner(uint64(w.ID), w.Rank, uint64(seq), 1)
			}
			if err := bt.Commit(index, 1); err != nil {
				b.Fatal(err)
			}
			index++
		}
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
}
