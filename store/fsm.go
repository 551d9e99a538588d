package store

import (
	"cmp"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// FSMStore is the FSM's durable state: its tables (see the package doc)
// plus the applied index, in a Pebble instance separate from the raft log.
// Writes skip the WAL sync because the raft log replays them; the applied
// index is written in the same batch as the data it covers.
type FSMStore struct {
	opts Options
	// commitMu serialises batch commits, snapshots' applied reads and
	// restores, so a restore never interleaves with a commit.
	commitMu sync.Mutex
	// mu is held shared by reads and commits, exclusively by the swap of a
	// restore and by Close.
	mu  sync.RWMutex
	gen *generation // gen is nil once closed.
	// guard refuses commits below the free-space reserve (diskguard.go).
	guard *diskGuard
}

// OpenFSM opens or creates the FSM store rooted at opts.Dir. The root holds
// a LIVE file naming the live generation directory; leftovers of an
// interrupted restore are removed.
func OpenFSM(opts Options) (*FSMStore, error) {
	o, err := opts.prepare()
	if err != nil {
		return nil, err
	}
	if err := mkdirSynced(o.FS, o.Dir); err != nil {
		return nil, err
	}
	o.Name = cmp.Or(o.Name, "fsm")
	id, err := readLive(o.FS, o.Dir)
	if err != nil {
		return nil, err
	}
	fresh := id == 0
	if fresh {
		id = 1
	}
	g, err := openGeneration(&o, id, fresh)
	if err != nil {
		return nil, err
	}
	if err := finishOpen(&o, g, fresh); err != nil {
		if errors.Is(err, pebble.ErrCorruption) && o.Observer != nil {
			o.Observer.Corruption(o.Name, "table")
		}
		return nil, errors.Join(err, g.release())
	}
	return &FSMStore{opts: o, gen: g, guard: newDiskGuard(&o)}, nil
}

// finishOpen records a new generation as live and clears leftovers.
func finishOpen(o *Options, g *generation, fresh bool) error {
	if fresh {
		if err := writeLive(o.FS, o.Dir, g.id); err != nil {
			return err
		}
	}
	return removeStale(o.FS, o.Dir, g.id)
}

// Close closes the store. An outstanding Snapshot keeps the underlying DB
// open until it is released. Close is idempotent.
func (s *FSMStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == nil {
		return nil
	}
	g := s.gen
	s.gen = nil
	return g.release()
}

// current returns the live generation with a reference the caller must
// release, or ErrClosed.
func (s *FSMStore) current() (*generation, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.gen == nil {
		return nil, ErrClosed
	}
	s.gen.acquire()
	return s.gen, nil
}

// withGen runs fn on the live generation under the shared lock.
func (s *FSMStore) withGen(fn func(g *generation) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.gen == nil {
		return ErrClosed
	}
	return fn(s.gen)
}

// Applied returns the raft index and term of the last committed batch.
func (s *FSMStore) Applied() (index, term uint64, err error) {
	err = s.withGen(func(g *generation) error {
		a := g.applied.Load()
		index, term = a.index, a.term
		return nil
	})
	return index, term, err
}

// Sync makes every committed batch durable by syncing the WAL. The snapshot
// path calls it first: once raft compacts its log past a snapshot, the log
// can no longer replay FSM writes that were committed without a sync.
func (s *FSMStore) Sync() error {
	return s.withGen(func(g *generation) error { return syncGen(g) })
}

// syncGen syncs a generation's WAL with an empty synced record.
func syncGen(g *generation) error {
	if err := g.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("store: sync fsm: %w", err)
	}
	return nil
}

// Flush writes the memtables to sstables and syncs, so the next open
// replays no WAL; a node calls it on a graceful shutdown, and benchmarks
// of the restart path use it to start from sstables alone.
func (s *FSMStore) Flush() error {
	return s.withGen(func(g *generation) error {
		if err := g.db.Flush(); err != nil {
			return fmt.Errorf("store: flush fsm: %w", err)
		}
		return nil
	})
}

// DiskFull reports whether the last commit found free space below the
// reserve; it clears on the first commit that finds room again.
func (s *FSMStore) DiskFull() bool { return s.guard.isFull() }
