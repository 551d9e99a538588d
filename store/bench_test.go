package store

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// benchLogs builds a batch of n entries of 256-byte payloads from index.
func benchLogs(n int, index uint64) []*raft.Log {
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{Index: index + uint64(i), Term: 1, Data: make([]byte, 256)}
	}
	return logs
}

// reportRate reports items per second for the measured loop.
func reportRate(b *testing.B, items int, unit string) {
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), unit)
}

// BenchmarkStoreLogs64 appends batches of 64 entries: synced Pebble on the
// real disk, Pebble on MemFS (no fsync cost), and raft's InmemStore.
func BenchmarkStoreLogs64(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) raft.LogStore
	}{
		{name: "pebble-disk-synced", open: func(b *testing.B) raft.LogStore {
			return openLogB(b, Options{Dir: b.TempDir(), Logger: quietLogger})
		}},
		{name: "pebble-memfs", open: func(b *testing.B) raft.LogStore {
			return openLogB(b, memOpts(vfs.NewMem(), "raft"))
		}},
		{name: "raft-inmem", open: func(*testing.B) raft.LogStore { return raft.NewInmemStore() }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			index, n := uint64(1), 0
			for b.Loop() {
				if err := s.StoreLogs(benchLogs(64, index)); err != nil {
					b.Fatal(err)
				}
				index += 64
				n += 64
			}
			reportRate(b, n, "entries/s")
		})
	}
}

// openLogB opens a LogStore closed at the end of the benchmark.
func openLogB(b *testing.B, o Options) *LogStore {
	s, err := OpenLogStore(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// putOwners commits n random ownership rows in batches of 1,000 starting
// at applied index index; it returns the next index.
func putOwners(tb testing.TB, s *FSMStore, rng *rand.Rand, n int, index uint64) uint64 {
	for done := 0; done < n; index++ {
		bt := s.NewBatch()
		for i := 0; i < 1000 && done < n; i, done = i+1, done+1 {
			bt.PutOwner(rng.Uint64N(32), uint32(rng.IntN(2)), rng.Uint64(), 1)
		}
		if err := bt.Commit(index, 1); err != nil {
			tb.Fatal(err)
		}
	}
	return index
}

// BenchmarkFSMCommit1000Owners commits batches of 1,000 ownership rows, the
// size of a busy KV-event batch, on the real disk.
func BenchmarkFSMCommit1000Owners(b *testing.B) {
	s, err := OpenFSM(Options{Dir: b.TempDir(), Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	index, n := uint64(1), 0
	for b.Loop() {
		index = putOwners(b, s, rng, 1000, index)
		n += 1000
	}
	reportRate(b, n, "entries/s")
}

// BenchmarkOwnerBytesPerEntry writes 200,000 random ownership rows, flushes
// and compacts, and reports the on-disk bytes per row.
func BenchmarkOwnerBytesPerEntry(b *testing.B) {
	const rows = 200_000
	var perEntry float64
	for b.Loop() {
		s, err := OpenFSM(memOpts(vfs.NewMem(), "fsm"))
		if err != nil {
			b.Fatal(err)
		}
		putOwners(b, s, rand.New(rand.NewPCG(3, 4)), rows, 1)
		perEntry = compactedBytes(b, s) / rows
		_ = s.Close()
	}
	b.ReportMetric(perEntry, "B/entry")
}

// compactedBytes flushes and fully compacts the ownership table and returns
// the size of its sstables.
func compactedBytes(b *testing.B, s *FSMStore) float64 {
	db := s.gen.db
	lo, hi := prefixBounds(tableOwner)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := db.Compact(context.Background(), lo, hi, true); err != nil {
		b.Fatal(err)
	}
	size, err := db.EstimateDiskUsage(lo, hi)
	if err != nil {
		b.Fatal(err)
	}
	return float64(size)
}

// BenchmarkRebuildScan1M opens a store holding 1,000,000 ownership rows on
// the real disk and scans them all, the restart path that rebuilds the
// in-memory index (target: ready within 2 s).
func BenchmarkRebuildScan1M(b *testing.B) {
	const rows = 1_000_000
	dir := b.TempDir()
	s, err := OpenFSM(Options{Dir: dir, Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	putOwners(b, s, rand.New(rand.NewPCG(5, 6)), rows, 1)
	compactedBytes(b, s)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	iters := 0
	for b.Loop() {
		iters++
		s, err := OpenFSM(Options{Dir: dir, Logger: quietLogger})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := s.ScanOwners(func(Owner) error { n++; return nil }); err != nil || n != rows {
			b.Fatalf("scanned %d rows: %v", n, err)
		}
		_ = s.Close()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(iters), "s/open+scan")
}
