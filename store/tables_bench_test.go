package store

import (
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkRememberRequestEvict commits one request per batch into a FIFO
// bounded at 1024 rows, evicting the oldest, and looks the new id up: the
// steady-state path of consensus's request memory.
func BenchmarkRememberRequestEvict(b *testing.B) {
	const bound = 1024
	s := openFSM(b, vfs.NewMem())
	result := make([]byte, 64)
	var seq uint64
	for b.Loop() {
		seq++
		id := "req-" + strconv.FormatUint(seq, 10)
		batch := s.NewBatch()
		batch.PutRequest(seq, id, result)
		if seq > bound {
			old := seq - bound
			batch.DeleteRequest(old, "req-"+strconv.FormatUint(old, 10))
		}
		if err := batch.Commit(seq, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Request(id); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, int(seq), "requests/s")
}

// BenchmarkEngineBlockLookup reads engine block ids from a table of 64k
// rows over 16 ranks.
func BenchmarkEngineBlockLookup(b *testing.B) {
	const rows = 1 << 16
	s := openFSM(b, vfs.NewMem())
	commit(b, s, 1, func(batch *Batch) {
		for i := uint64(0); i < rows; i++ {
			batch.PutEngineBlock(i%16, 0, i, i*31)
		}
	})
	var i uint64
	for b.Loop() {
		if _, err := s.EngineBlock(i%16, 0, i%rows); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}
