package store

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
func incumbentKey(set string) []byte { return append([]byte{tableIncumbent}, set...) }

// PutIncumbent stores a worker set's incumbent.
func (b *Batch) PutIncumbent(set string, value []byte) {
	b.record(checkName("set key", set, MaxSetKeyBytes))
	b.set(incumbentKey(set), value)
}

// DeleteIncumbent removes a worker set's incumbent.
func (b *Batch) DeleteIncumbent(set string) { b.del(incumbentKey(set)) }

// ScanIncumbents calls fn for every row of the incumbents table, ordered
// by set key; the value is a copy.
func (s *FSMStore) ScanIncumbents(fn func(Incumbent) error) error {
	return scanPrefix(s, tableIncumbent, decodeIncumbent, fn)
}

// decodeIncumbent decodes an incumbents row.
func decodeIncumbent(k, v []byte) (Incumbent, error) {
	set, value, err := decodeNamed(tableIncumbent, "incumbent", k, v)
	return Incumbent{Set: set, Value: value}, err
}
