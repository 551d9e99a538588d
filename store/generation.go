package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// liveFile names the file in the FSM root directory that holds the name of
// the live generation directory. Replacing it by rename is the atomic step
// of a restore.
const liveFile = "LIVE"

// genPrefix starts every generation directory name.
const genPrefix = "gen-"

// fsmFormatVersion is the version of the FSM key layout and value codecs,
// stored under metaVersion. It changes only with a migration.
const fsmFormatVersion uint32 = 1

// applied is an applied raft index and the term of that entry.
type applied struct{ index, term uint64 }

// generation is one Pebble instance holding a complete FSM state. A restore
// builds a new generation and swaps it in; the old one is closed (and its
// directory removed) when its last reference, a store or an outstanding
// snapshot, is released.
type generation struct {
	id       uint64
	dir      string
	fs       vfs.FS
	db       *pebble.DB
	applied  atomic.Pointer[applied]
	refs     atomic.Int32
	obsolete atomic.Bool
}

// genName is the directory name of generation id.
func genName(id uint64) string { return fmt.Sprintf("%s%06d", genPrefix, id) }

// parseGenName inverts genName.
func parseGenName(name string) (uint64, error) {
	var id uint64
	if _, err := fmt.Sscanf(name, genPrefix+"%d", &id); err != nil || genName(id) != name {
		return 0, fmt.Errorf("%w: generation name %q", ErrCorrupt, name)
	}
	return id, nil
}

// openGeneration opens (or, when fresh, wipes and creates) generation id
// under o.Dir, checks its format version and loads its applied index.
func openGeneration(o *Options, id uint64, fresh bool) (*generation, error) {
	dir := o.FS.PathJoin(o.Dir, genName(id))
	if fresh {
		if err := o.FS.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("store: clear %s: %w", dir, err)
		}
	}
	if err := mkdirSynced(o.FS, dir); err != nil {
		return nil, err
	}
	po, release := o.pebbleOptions()
	defer release()
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("store: open fsm %s: %w", dir, err)
	}
	g := &generation{id: id, dir: dir, fs: o.FS, db: db}
	g.refs.Store(1)
	if err := g.load(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return g, nil
}

// load checks the format version, writing it into a new store, and reads
// the applied index.
func (g *generation) load() error {
	v, err := getValue(g.db, metaVersion)
	if errors.Is(err, ErrNotFound) {
		v = binary.BigEndian.AppendUint32(nil, fsmFormatVersion)
		err = g.db.Set(metaVersion, v, pebble.Sync)
	}
	if err != nil {
		return err
	}
	if len(v) != 4 || binary.BigEndian.Uint32(v) != fsmFormatVersion {
		return fmt.Errorf("%w: fsm format %x, want %d", ErrUnsupported, v, fsmFormatVersion)
	}
	a, err := readApplied(g.db)
	if err != nil {
		return err
	}
	g.applied.Store(&a)
	return nil
}

// readApplied reads the applied index and term; a store that never
// committed a batch has applied index 0.
func readApplied(r pebble.Reader) (applied, error) {
	v, err := getValue(r, metaApplied)
	if errors.Is(err, ErrNotFound) {
		return applied{}, nil
	}
	if err != nil {
		return applied{}, err
	}
	if len(v) != 16 {
		return applied{}, fmt.Errorf("%w: applied index value of %d bytes", ErrCorrupt, len(v))
	}
	return applied{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}, nil
}

// encodeApplied encodes an applied index and term as BE64 ‖ BE64.
func encodeApplied(a applied) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, a.index), a.term)
}

// acquire takes a reference.
func (g *generation) acquire() { g.refs.Add(1) }

// release drops a reference; the last one closes the DB and, if the
// generation was superseded, removes its directory.
func (g *generation) release() error {
	if g.refs.Add(-1) != 0 {
		return nil
	}
	err := g.db.Close()
	if g.obsolete.Load() {
		err = errors.Join(err, g.fs.RemoveAll(g.dir))
	}
	return err
}

// discard marks the generation obsolete and releases the caller's reference.
func (g *generation) discard() error {
	g.obsolete.Store(true)
	return g.release()
}

// readLive returns the live generation id, or 0 when there is none yet.
func readLive(fs vfs.FS, root string) (uint64, error) {
	f, err := fs.Open(fs.PathJoin(root, liveFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: open %s: %w", liveFile, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, fmt.Errorf("store: read %s: %w", liveFile, err)
	}
	return parseGenName(strings.TrimSpace(string(b)))
}

// writeLive atomically points the root at generation id: write a temporary
// file, sync it, rename it over LIVE and sync the directory.
func writeLive(fs vfs.FS, root string, id uint64) error {
	tmp, live := fs.PathJoin(root, liveFile+".tmp"), fs.PathJoin(root, liveFile)
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("store: create %s: %w", tmp, err)
	}
	_, err = f.Write([]byte(genName(id) + "\n"))
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = fs.Rename(tmp, live)
	}
	if err == nil {
		err = syncDir(fs, root)
	}
	if err != nil {
		return fmt.Errorf("store: write %s: %w", liveFile, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// mkdirSynced creates dir and any missing parents, then syncs every parent
// whose entries changed, so the new directories survive a crash.
func mkdirSynced(fs vfs.FS, dir string) error {
	var parents []string
	for p := fs.PathDir(dir); ; p = fs.PathDir(p) {
		parents = append(parents, p)
		if _, err := fs.Stat(p); err == nil || fs.PathDir(p) == p {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("store: create %s: %w", dir, err)
	}
	for _, p := range parents {
		if err := syncDir(fs, p); err != nil {
			return fmt.Errorf("store: sync %s: %w", p, err)
		}
	}
	return nil
}

// removeStale deletes generation directories other than the live one: the
// leftovers of a restore interrupted before or after its swap.
func removeStale(fs vfs.FS, root string, live uint64) error {
	names, err := fs.List(root)
	if err != nil {
		return fmt.Errorf("store: list %s: %w", root, err)
	}
	for _, n := range names {
		if n == liveFile+".tmp" || (strings.HasPrefix(n, genPrefix) && n != genName(live)) {
			if err := fs.RemoveAll(fs.PathJoin(root, n)); err != nil {
				return fmt.Errorf("store: remove stale %s: %w", n, err)
			}
		}
	}
	return nil
}
