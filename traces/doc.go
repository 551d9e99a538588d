// Package traces reads request traces in Mooncake JSONL form and carries the
// traces that kvrouter's tests, benchmarks and demo replay, embedded so that
// the binary needs no files beside it. The traces are public data; their
// origin and license are in README.md.
//
// The reader validates every record at the boundary (non-negative lengths,
// non-decreasing timestamps, prompts long enough for their blocks) and
// reports the line of the first bad record; it never panics on input.
package traces

import _ "embed"

// MooncakeSynthetic is the Mooncake FAST'25 synthetic trace.
//
//go:embed mooncake_synthetic.jsonl
var MooncakeSynthetic []byte
