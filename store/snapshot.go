package store

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// The compile-time guard: a Snapshot plugs into raft as an FSMSnapshot.
var _ raft.FSMSnapshot = (*Snapshot)(nil)

// Snapshot is a consistent, point-in-time view of the FSM tables. Taking it
// is O(1) apart from a WAL sync; WriteTo streams it in the logical snapshot
// format. Persist and WriteTo may run concurrently with batch commits and
// with a restore; the view keeps its DB open until Release.
type Snapshot struct {
	gen     *generation
	snap    *pebble.Snapshot
	applied applied
	once    sync.Once
}

// Snapshot syncs the WAL, so every committed batch is durable before raft
// may compact its log past it, and then captures a Pebble snapshot. The
// applied index is read from the snapshot itself, so it describes exactly
// the captured data.
func (s *FSMStore) Snapshot() (*Snapshot, error) {
	g, err := s.current()
	if err != nil {
		return nil, err
	}
	if err := syncGen(g); err != nil {
		return nil, errors.Join(err, g.release())
	}
	snap := g.db.NewSnapshot()
	a, err := readApplied(snap)
	if err != nil {
		return nil, errors.Join(err, snap.Close(), g.release())
	}
	return &Snapshot{gen: g, snap: snap, applied: a}, nil
}

// Index returns the applied raft index the snapshot covers.
func (sn *Snapshot) Index() uint64 { return sn.applied.index }

// Term returns the term of the entry at Index.
func (sn *Snapshot) Term() uint64 { return sn.applied.term }

// WriteTo streams the snapshot to w: header, every table's records in key
// order, trailer with counts and checksum. It returns the bytes written.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	sw := newSnapWriter(w)
	sw.header(sn.applied)
	for _, t := range snapTables {
		lo, hi := prefixBounds(t)
		err := iterate(sn.snap, lo, hi, func(k, v []byte) error {
			sw.record(k, v)
			return sw.err
		})
		if err != nil {
			return sw.n, fmt.Errorf("store: write snapshot table %q: %w", t, err)
		}
	}
	err := sw.trailer()
	return sw.n, err
}

// Persist writes the snapshot into a raft sink, closing it on success and
// cancelling it on failure, as raft.FSMSnapshot requires.
func (sn *Snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sn.WriteTo(sink); err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

// Release closes the view; the last reference to a superseded generation
// closes its DB. Release is idempotent.
func (sn *Snapshot) Release() {
	sn.once.Do(func() {
		// Errors here have no caller to go to; the DB close is best effort
		// and a leaked directory is cleared on the next open.
		_ = sn.snap.Close()
		_ = sn.gen.release()
	})
}
