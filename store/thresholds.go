package store

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
func thresholdKey(model string) []byte { return append([]byte{tableThreshold}, model...) }

// PutThreshold stores a model's runtime thresholds.
func (b *Batch) PutThreshold(model string, value []byte) {
	b.record(checkName("model name", model, MaxModelBytes))
	b.set(thresholdKey(model), value)
}

// DeleteThreshold removes a model's runtime thresholds.
func (b *Batch) DeleteThreshold(model string) { b.del(thresholdKey(model)) }

// ScanThresholds calls fn for every row of the thresholds table, ordered
// by model; the value is a copy.
func (s *FSMStore) ScanThresholds(fn func(Threshold) error) error {
	return scanPrefix(s, tableThreshold, decodeThreshold, fn)
}

// decodeThreshold decodes a thresholds row.
func decodeThreshold(k, v []byte) (Threshold, error) {
	model, value, err := decodeNamed(tableThreshold, "threshold", k, v)
	return Threshold{Model: model, Value: value}, err
}
