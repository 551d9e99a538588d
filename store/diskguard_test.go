package store

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// countObserver records Observer events.
type countObserver struct{ full, writeErrs, corrupt int }

func (o *countObserver) DiskFull(_ string, full bool) {
	if full {
		o.full++
	}
}
func (o *countObserver) WriteError(string, string) { o.writeErrs++ }
func (o *countObserver) Corruption(string, string) { o.corrupt++ }

func TestDiskGuard(t *testing.T) {
	mem := vfs.NewMem()
	obs := &countObserver{}
	opts := func(dir string) Options {
		return Options{Dir: dir, FS: mem, Logger: slog.New(slog.DiscardHandler), MinFreeBytes: 1 << 20, Observer: obs}
	}
	ls, err := OpenLogStore(opts("raft"))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	fs, err := OpenFSM(opts("fsm"))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 10, TotalBytes: 1 << 30})

	if err := ls.StoreLog(&raft.Log{Index: 1, Term: 1}); !errors.Is(err, ErrDiskFull) || !ls.DiskFull() {
		t.Fatalf("append below the reserve: %v (full %v), want ErrDiskFull", err, ls.DiskFull())
	}
	if err := ls.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatalf("raft's term must still be stored from the reserve: %v", err)
	}
	b := fs.NewBatch()
	b.PutWorker(1, []byte("card"))
	if err := b.Commit(1, 1); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("commit below the reserve: %v, want ErrDiskFull", err)
	}
	b.PutWorker(2, []byte("card2")) // The refused batch stays open and grows.

	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 1 << 30})
	if err := ls.StoreLog(&raft.Log{Index: 1, Term: 1}); err != nil || ls.DiskFull() {
		t.Fatalf("append once space returned: %v (full %v)", err, ls.DiskFull())
	}
	if err := b.Commit(2, 1); err != nil {
		t.Fatalf("commit of the kept batch once space returned: %v", err)
	}
	if idx, _, _ := fs.Applied(); idx != 2 {
		t.Fatalf("applied %d after the kept batch, want 2", idx)
	}
	if obs.full != 2 || obs.writeErrs != 2 {
		t.Fatalf("observer saw %d disk-full transitions and %d write errors, want 2 and 2", obs.full, obs.writeErrs)
	}
}
