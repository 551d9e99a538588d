package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/internal/failpoint"
)

// The compile-time guards: LogStore is both of raft's storage interfaces and
// deliberately not a MonotonicLogStore, because it tolerates gaps.
var (
	_ raft.LogStore    = (*LogStore)(nil)
	_ raft.StableStore = (*LogStore)(nil)
)

// LogStore is the raft log and stable store on its own Pebble instance.
// Every write is synced before the call returns, because raft acknowledges
// appends and votes as soon as the call returns.
type LogStore struct {
	mu     sync.RWMutex // mu is held shared by operations and exclusively by Close.
	db     *pebble.DB   // db is nil once closed.
	closed bool
	guard  *diskGuard
}

// OpenLogStore opens or creates the raft log store in opts.Dir.
func OpenLogStore(opts Options) (*LogStore, error) {
	o, err := opts.prepare()
	if err != nil {
		return nil, err
	}
	if err := mkdirSynced(o.FS, o.Dir); err != nil {
		return nil, err
	}
	o.Name = cmp.Or(o.Name, "raft")
	po, release := o.pebbleOptions()
	defer release()
	db, err := pebble.Open(o.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("store: open log store %s: %w", o.Dir, err)
	}
	return &LogStore{db: db, guard: newDiskGuard(&o)}, nil
}

// Close closes the store; later calls return ErrClosed. Close is idempotent.
func (s *LogStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close()
}

// read runs fn with the DB under the shared lock, or returns ErrClosed.
func (s *LogStore) read(fn func(db *pebble.DB) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return fn(s.db)
}

// FirstIndex returns the lowest stored index, 0 when the log is empty.
func (s *LogStore) FirstIndex() (uint64, error) { return s.edgeIndex(true) }

// LastIndex returns the highest stored index, 0 when the log is empty.
func (s *LogStore) LastIndex() (uint64, error) { return s.edgeIndex(false) }

// edgeIndex finds the first or last log key by bounded iteration; it never
// assumes the log is contiguous.
func (s *LogStore) edgeIndex(first bool) (idx uint64, err error) {
	err = s.read(func(db *pebble.DB) error {
		lo, hi := prefixBounds(prefixLog)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		ok := it.Last()
		if first {
			ok = it.First()
		}
		if ok {
			idx, err = parseLogKey(it.Key())
		}
		return errors.Join(err, it.Close())
	})
	return idx, err
}

// GetLog reads the entry at index into log, or returns raft.ErrLogNotFound.
func (s *LogStore) GetLog(index uint64, log *raft.Log) error {
	return s.read(func(db *pebble.DB) error {
		val, closer, err := db.Get(logKey(index))
		if errors.Is(err, pebble.ErrNotFound) {
			return raft.ErrLogNotFound
		}
		if err != nil {
			return fmt.Errorf("store: get log %d: %w", index, err)
		}
		err = decodeLog(val, log) // decodeLog copies out of val.
		if cerr := closer.Close(); err == nil {
			err = cerr
		}
		if err == nil && log.Index != index {
			err = fmt.Errorf("%w: key %d holds log %d", ErrCorrupt, index, log.Index)
		}
		if errors.Is(err, ErrCorrupt) {
			s.guard.corrupt("log")
		}
		return err
	})
}

// StoreLog stores one entry, synced.
func (s *LogStore) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores the entries in one batch committed with pebble.Sync, so
// all or none are durable when it returns. Below the free-space reserve it
// writes nothing and returns ErrDiskFull: raft then answers the entries'
// proposals with that error (a leader steps down), and a follower's
// append fails, so nothing is acknowledged without a durable write.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	if err := s.guard.check(); err != nil {
		return err
	}
	failpoint.Inject(failpoint.StoreBeforeSyncLogs)
	defer failpoint.Inject(failpoint.StoreAfterSyncLogs)
	return s.read(func(db *pebble.DB) error {
		b := db.NewBatch()
		defer b.Close()
		var buf []byte
		for _, l := range logs {
			buf = encodeLog(buf[:0], l)
			if err := b.Set(logKey(l.Index), buf, nil); err != nil {
				return err
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			s.guard.writeFailed(err)
			return fmt.Errorf("store: store %d logs: %w", len(logs), err)
		}
		return nil
	})
}

// DeleteRange deletes the entries in [min, max]. min > max is a no-op (raft
// has issued it); max beyond the last entry is simply clamped by the range
// tombstone; max == MaxUint64 uses the prefix bound, since max+1 overflows.
func (s *LogStore) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	end := logKey(max + 1)
	if max == math.MaxUint64 {
		_, end = prefixBounds(prefixLog)
	}
	return s.read(func(db *pebble.DB) error {
		if err := db.DeleteRange(logKey(min), end, pebble.Sync); err != nil {
			return fmt.Errorf("store: delete logs [%d, %d]: %w", min, max, err)
		}
		return nil
	})
}

// Set stores a stable key, synced.
func (s *LogStore) Set(key, val []byte) error {
	return s.read(func(db *pebble.DB) error {
		if err := db.Set(stableKey(key), val, pebble.Sync); err != nil {
			return fmt.Errorf("store: set %q: %w", key, err)
		}
		return nil
	})
}

// Get returns a copy of a stable value, or an error whose text is exactly
// "not found" when the key is missing, as raft requires.
func (s *LogStore) Get(key []byte) (val []byte, err error) {
	err = s.read(func(db *pebble.DB) error {
		v, err := getValue(db, stableKey(key))
		if errors.Is(err, ErrNotFound) {
			return errStableNotFound
		}
		val = v
		return err
	})
	return val, err
}

// SetUint64 stores a stable uint64 as 8 big-endian bytes, synced.
func (s *LogStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns a stable uint64, or the "not found" error.
func (s *LogStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable key %q holds %d bytes, want 8", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// DiskFull reports whether the last append found free space below the
// reserve; it clears on the first append that finds room again.
func (s *LogStore) DiskFull() bool { return s.guard.isFull() }
