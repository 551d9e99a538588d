package store

import (
	"fmt"
	"unicode/utf8"
)

// MaxModelBytes bounds a model name in the thresholds table; model names
// are short identifiers or repository paths.
const MaxModelBytes = 512

// Threshold is one row of the thresholds table: a model's runtime busy
// thresholds, as an opaque encoded value (the consensus layer's record).
type Threshold struct {
	Model string
	Value []byte
}

// thresholdKey encodes 't' ‖ model bytes.
func thresholdKey(model string) []byte {
	return append([]byte{tableThreshold}, model...)
}

// checkModel refuses a model name the table cannot key.
func checkModel(model string) error {
	if model == "" || len(model) > MaxModelBytes || !utf8.ValidString(model) {
		return fmt.Errorf("%w: model name of %d bytes (want 1..%d, UTF-8)", ErrInvalidArgument, len(model), MaxModelBytes)
	}
	return nil
}

// PutThreshold stores a model's runtime thresholds.
func (b *Batch) PutThreshold(model string, value []byte) {
	if err := checkModel(model); err != nil {
		b.record(err)
		return
	}
	b.set(thresholdKey(model), value)
}

// DeleteThreshold removes a model's runtime thresholds.
func (b *Batch) DeleteThreshold(model string) { b.del(thresholdKey(model)) }

// ScanThresholds calls fn for every row of the thresholds table, ordered
// by model; the value is a copy.
func (s *FSMStore) ScanThresholds(fn func(Threshold) error) error {
	lo, hi := prefixBounds(tableThreshold)
	return scanTable(s, lo, hi, decodeThreshold, fn)
}

// decodeThreshold decodes a thresholds row.
func decodeThreshold(k, v []byte) (Threshold, error) {
	if len(k) < 2 || k[0] != tableThreshold {
		return Threshold{}, fmt.Errorf("%w: threshold key %x", ErrCorrupt, k)
	}
	return Threshold{Model: string(k[1:]), Value: append([]byte(nil), v...)}, nil
}
