package store

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// DefaultMinFreeBytes is the free space a store keeps in reserve: below it
// the store refuses raft log appends and FSM commits with ErrDiskFull.
//
// The reserve exists because Pebble cannot survive a failed WAL write: a
// commit whose WAL write fails (ENOSPC included) ends in Logger.Fatalf,
// since its commit pipeline is left unusable. The store therefore refuses
// growth while there is still room, and keeps the reserve for the writes
// that must not fail: raft's term and vote (raft panics when it cannot
// persist them), log truncation after a snapshot (which frees space), and
// the FSM's WAL sync. 64 MiB holds several seconds of appends at the
// commit rates measured for a DC cluster, and far more than the stable
// store's few keys.
const DefaultMinFreeBytes uint64 = 64 << 20

// Observer receives a store's health events, labelled by Options.Name. It
// is called on the writing goroutine and must not block; a nil Observer
// receives nothing. internal/metrics.Storage implements it.
type Observer interface {
	// DiskFull reports a change of the store's disk-full state.
	DiskFull(store string, full bool)
	// WriteError reports a write the store refused or that failed;
	// kind is "disk_full" or "io".
	WriteError(store, kind string)
	// Corruption reports data that failed its checksum or did not decode.
	Corruption(store, kind string)
}

// diskGuard refuses growth of a store while its file system's free space
// is below the reserve. A file system that cannot report its usage
// (vfs.MemFS without a set usage) is treated as having room.
type diskGuard struct {
	fs   vfs.FS
	dir  string
	min  uint64
	name string
	obs  Observer
	full atomic.Bool
}

// newDiskGuard builds the guard of a store opened with o.
func newDiskGuard(o *Options) *diskGuard {
	return &diskGuard{fs: o.FS, dir: o.Dir, min: o.MinFreeBytes, name: o.Name, obs: o.Observer}
}

// check returns ErrDiskFull while free space is below the reserve, and
// reports transitions of the full state.
func (g *diskGuard) check() error {
	u, err := g.fs.GetDiskUsage(g.dir)
	full := err == nil && u.AvailBytes < g.min
	if g.full.Swap(full) != full && g.obs != nil {
		g.obs.DiskFull(g.name, full)
	}
	if !full {
		return nil
	}
	if g.obs != nil {
		g.obs.WriteError(g.name, "disk_full")
	}
	return fmt.Errorf("%w: %s has %d bytes free, below the %d-byte reserve", ErrDiskFull, g.dir, u.AvailBytes, g.min)
}

// isFull reports the state of the last check.
func (g *diskGuard) isFull() bool { return g.full.Load() }

// writeFailed reports a write error that is not the guard's own refusal.
func (g *diskGuard) writeFailed(err error) {
	if err != nil && g.obs != nil && !errors.Is(err, ErrDiskFull) {
		g.obs.WriteError(g.name, "io")
	}
}

// corrupt reports a corruption found while reading.
func (g *diskGuard) corrupt(kind string) {
	if g.obs != nil {
		g.obs.Corruption(g.name, kind)
	}
}
