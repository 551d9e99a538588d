package inproc

import (
	"strings"
	"sync"
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
	// power orders syncs against a power loss: a sync holds it shared
	// from its start to its end, powerLoss holds it alone. Between a
	// loss and release, lost is set and syncs wait for restored.
	power    sync.RWMutex
	lost     bool
	restored chan struct{}
}

// newDisk returns an empty crashable disk.
func newDisk() *disk { return &disk{mem: vfs.NewCrashableMem()} }

// powerLoss returns a disk holding only what was synced: the state after
// a power loss at this moment. The member keeps running on d, but every
// sync it starts from now on blocks until release: a process whose power
// failed acknowledges nothing more, and without the block a sync that
// completed after the image could be acknowledged and then be missing
// from the image, a loss the store did not cause. A sync already under
// way when the power fails completes first and is in the image.
func (d *disk) powerLoss() *disk {
	d.power.Lock()
	defer d.power.Unlock()
	d.lost, d.restored = true, make(chan struct{})
	return &disk{mem: d.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})}
}

// release lets the syncs blocked since powerLoss go on (into d, which the
// member no longer uses once it restarts from the image), so that the
// member can be stopped.
func (d *disk) release() {
	d.power.Lock()
	defer d.power.Unlock()
	if d.lost {
		d.lost = false
		close(d.restored)
	}
}

// synced runs one sync of the file system's, ordered against powerLoss.
func (d *disk) synced(sync func() error) error {
	d.power.RLock()
	if d.lost {
		restored := d.restored
		d.power.RUnlock()
		<-restored
		return sync()
	}
	defer d.power.RUnlock()
	return sync()
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

// file orders a file's syncs against a power loss.
type file struct {
	vfs.File
	d *disk
}

func (f file) Sync() error     { return f.d.synced(f.File.Sync) }
func (f file) SyncData() error { return f.d.synced(f.File.SyncData) }
func (f file) SyncTo(n int64) (full bool, err error) {
	err = f.d.synced(func() (err error) { full, err = f.File.SyncTo(n); return err })
	return full, err
}

// wrap wraps a file the FS opened.
func (f *diskFS) wrap(fl vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return file{File: fl, d: f.d}, nil
}

func (f *diskFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.Create(name, c))
}
func (f *diskFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.wrap(f.FS.Open(name, opts...))
}
func (f *diskFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name, c, opts...))
}
func (f *diskFS) OpenDir(name string) (vfs.File, error) { return f.wrap(f.FS.OpenDir(name)) }
func (f *diskFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.ReuseForWrite(old, name, c))
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
