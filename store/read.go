package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// getValue returns a copy of the value at key, or ErrNotFound. The copy is
// taken before the closer is closed, after which Pebble may reuse the bytes.
func getValue(r pebble.Reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: key %q", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get %q: %w", key, err)
	}
	out := append([]byte{}, v...)
	return out, closer.Close()
}

// iterate calls fn for every key in [lower, upper) in order. The key and
// value passed to fn are valid only during the call.
func iterate(r pebble.Reader, lower, upper []byte, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("store: iterator: %w", err)
	}
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		var v []byte
		if v, err = it.ValueAndErr(); err == nil {
			err = fn(it.Key(), v)
		}
	}
	return errors.Join(err, it.Close())
}

// scanTable decodes every row in [lower, upper) and hands it to fn; fn
// returning an error stops the scan with that error.
func scanTable[T any](s *FSMStore, lower, upper []byte, decode func(k, v []byte) (T, error), fn func(T) error) error {
	return s.withGen(func(g *generation) error {
		return iterate(g.db, lower, upper, func(k, v []byte) error {
			row, err := decode(k, v)
			if err != nil {
				return err
			}
			return fn(row)
		})
	})
}

// scanPrefix is scanTable over every row of one table.
func scanPrefix[T any](s *FSMStore, table byte, decode func(k, v []byte) (T, error), fn func(T) error) error {
	lo, hi := prefixBounds(table)
	return scanTable(s, lo, hi, decode, fn)
}

// lookup reads the row at key from the live generation and decodes it
// with its table's decoder.
func lookup[T any](s *FSMStore, key []byte, decode func(k, v []byte) (T, error)) (row T, err error) {
	err = s.withGen(func(g *generation) error {
		v, err := getValue(g.db, key)
		if err == nil {
			row, err = decode(key, v)
		}
		return err
	})
	return row, err
}

// Owner returns the tiers on which a rank holds a block, or ErrNotFound.
func (s *FSMStore) Owner(worker uint64, rank uint32, hash uint64) (TierMask, error) {
	o, err := lookup(s, ownerKey(worker, rank, hash), decodeOwner)
	return o.Tiers, err
}

// Cursor returns the last applied event id of a rank, or ErrNotFound.
func (s *FSMStore) Cursor(worker uint64, rank uint32) (uint64, error) {
	c, err := lookup(s, cursorKey(worker, rank), decodeCursor)
	return c.EventID, err
}

// Worker returns a copy of an engine's card, or ErrNotFound.
func (s *FSMStore) Worker(worker uint64) ([]byte, error) {
	w, err := lookup(s, workerKey(worker), decodeWorker)
	return w.Card, err
}

// Session returns a binding, or ErrNotFound.
func (s *FSMStore) Session(key string) (Session, error) {
	return lookup(s, sessionKey(key), decodeSessionRow)
}

// ScanOwners calls fn for every ownership row, ordered by worker, rank and
// block hash. It is the rebuild path of the in-memory index on restart.
func (s *FSMStore) ScanOwners(fn func(Owner) error) error {
	return scanPrefix(s, tableOwner, decodeOwner, fn)
}

// ScanOwnersOfRank calls fn for every block held by one rank.
func (s *FSMStore) ScanOwnersOfRank(worker uint64, rank uint32, fn func(Owner) error) error {
	lo, hi := rankRange(tableOwner, worker, rank)
	return scanTable(s, lo, hi, decodeOwner, fn)
}

// ScanCursors calls fn for every cursor row.
func (s *FSMStore) ScanCursors(fn func(Cursor) error) error {
	return scanPrefix(s, tableCursor, decodeCursor, fn)
}

// ScanWorkers calls fn for every worker card; the card is a copy.
func (s *FSMStore) ScanWorkers(fn func(WorkerCard) error) error {
	return scanPrefix(s, tableWorker, decodeWorker, fn)
}

// ScanSessions calls fn for every session binding, ordered by key.
func (s *FSMStore) ScanSessions(fn func(Session) error) error {
	return scanPrefix(s, tableSession, decodeSessionRow, fn)
}
