package store

import (
	"fmt"
	"unicode/utf8"
)

// MaxSetKeyBytes bounds a worker set's key in the incumbents table: five
// short names (namespace, component, endpoint, model, worker type).
const MaxSetKeyBytes = 2048

// Incumbent is one row of the incumbents table: a worker set's incumbent,
// as an opaque encoded value (the consensus layer's record), under the
// set's encoded key.
type Incumbent struct {
	Set   string
	Value []byte
}

// incumbentKey encodes 'i' ‖ set key bytes.
func incumbentKey(set string) []byte {
	return append([]byte{tableIncumbent}, set...)
}

// checkSetKey refuses a set key the table cannot key.
func checkSetKey(set string) error {
	if set == "" || len(set) > MaxSetKeyBytes || !utf8.ValidString(set) {
		return fmt.Errorf("%w: set key of %d bytes (want 1..%d, UTF-8)", ErrInvalidArgument, len(set), MaxSetKeyBytes)
	}
	return nil
}

// PutIncumbent stores a worker set's incumbent.
func (b *Batch) PutIncumbent(set string, value []byte) {
	if err := checkSetKey(set); err != nil {
		b.record(err)
		return
	}
	b.set(incumbentKey(set), value)
}

// DeleteIncumbent removes a worker set's incumbent.
func (b *Batch) DeleteIncumbent(set string) { b.del(incumbentKey(set)) }

// ScanIncumbents calls fn for every row of the incumbents table, ordered
// by set key; the value is a copy.
func (s *FSMStore) ScanIncumbents(fn func(Incumbent) error) error {
	lo, hi := prefixBounds(tableIncumbent)
	return scanTable(s, lo, hi, decodeIncumbent, fn)
}

// decodeIncumbent decodes an incumbents row.
func decodeIncumbent(k, v []byte) (Incumbent, error) {
	if len(k) < 2 || k[0] != tableIncumbent {
		return Incumbent{}, fmt.Errorf("%w: incumbent key %x", ErrCorrupt, k)
	}
	return Incumbent{Set: string(k[1:]), Value: append([]byte(nil), v...)}, nil
}
