package filter

import "errors"

// Sentinel errors of the package. Callers match them with errors.Is; every
// returned error wraps exactly one of them with the detail that caused it.
var (
	// ErrConfig is returned for a Config that fails validation.
	ErrConfig = errors.New("filter: invalid config")
	// ErrFull is returned when a cuckoo insert runs out of kicks. The filter
	// is left exactly as it was before the call. It is a capacity signal,
	// not proof that no free slot exists: the owner should rebuild into a
	// larger filter.
	ErrFull = errors.New("filter: cuckoo filter full")
	// ErrNotFound is returned when deleting a fingerprint that is not in
	// the filter. The filter is unchanged.
	ErrNotFound = errors.New("filter: fingerprint not present")
	// ErrNotHeld is returned by RefSet.Remove for a block whose reference
	// count is already zero. The filter is never touched in that case.
	ErrNotHeld = errors.New("filter: block not held")
	// ErrGeometry is returned when two filters or a filter and a delta do
	// not share kind, seed and bucket count.
	ErrGeometry = errors.New("filter: geometry mismatch")
	// ErrBase is returned when a delta's declared entry count does not
	// match the filter it is applied to: the delta extends another
	// version. The filter is unchanged; the client action is a snapshot.
	ErrBase = errors.New("filter: delta does not extend this version")
	// ErrCorrupt is the class of every malformed-input error from the
	// decoders: truncation, bad magic, bad checksum, inconsistent fields.
	// The client action is to discard the payload and ask for a snapshot.
	ErrCorrupt = errors.New("filter: corrupt encoding")
	// ErrUnsupported is returned for a well-formed encoding this build
	// cannot use: an unknown format version, kind or parameter set, or a
	// Bloom payload in a build without Bloom support. The client action is
	// to report a contract mismatch, not to retry.
	ErrUnsupported = errors.New("filter: unsupported encoding")
)
