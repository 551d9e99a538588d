package inproc

import (
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// minFree is the stores' free-space reserve in these tests.
const minFree = 8 << 20

// disk is one member's in-memory disk with injectable faults: a full
// disk (free space below the reserve, and ENOSPC on table writes, the
// writes a filling disk fails first) and fsync latency.
type disk struct {
	mem   *vfs.MemFS
	full  atomic.Bool
	delay atomic.Int64 // fsync latency, ns
	// enospc counts injected ENOSPC errors; syncs counts fsyncs.
	enospc atomic.Uint64
	syncs  atomic.Uint64
}

// newDisk returns an empty crashable disk.
func newDisk() *disk { return &disk{mem: vfs.NewCrashableMem()} }

// crashImage returns a disk holding only what was synced: the state after
// a power loss at this moment.
func (d *disk) crashImage() *disk {
	return &disk{mem: d.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})}
}

// fs returns the file system the stores use.
func (d *disk) fs() vfs.FS {
	return &diskFS{FS: errorfs.Wrap(d.mem, errorfs.InjectorFunc(d.inject)), d: d}
}

// inject is the errorfs hook.
func (d *disk) inject(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		d.syncs.Add(1)
		if ns := d.delay.Load(); ns > 0 {
			time.Sleep(time.Duration(ns))
		}
	case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		if d.full.Load() && strings.HasSuffix(op.Path, ".sst") {
			d.enospc.Add(1)
			return syscall.ENOSPC
		}
	}
	return nil
}

// diskFS reports the disk's free space: 1 MiB (below the reserve) while
// full, 1 GiB otherwise.
type diskFS struct {
	vfs.FS
	d *disk
}

// GetDiskUsage implements vfs.FS.
func (f *diskFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	const total = 1 << 30
	free := uint64(total)
	if f.d.full.Load() {
		free = 1 << 20
	}
	return vfs.DiskUsage{AvailBytes: free, TotalBytes: total, UsedBytes: total - free}, nil
}
