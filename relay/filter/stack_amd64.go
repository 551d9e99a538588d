//go:build amd64 && !purego && !race

package filter

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveRowMatch reports whether hitsAVX2 can run here.
var haveRowMatch = cpu.X86.HasAVX2

// hitsAVX2 is Stack.Hits for rows of 4*chunks words (chunks >= 1), in
// stack_amd64.s: it prefetches every probe's rows, then compares each row
// with the probe's fingerprint 16 lanes (32 bytes) at a time, where the
// portable loop (matchRowsWords) takes a dozen operations per word. In
// a profile of the consumer's search, the portable loop and its per-probe
// call were the largest part of a lookup. The probes' rows must lie in
// rows; Hits checks that.
//
//go:noescape
func hitsAVX2(rows *uint64, ps *StackProbe, n int, chunks int, masks *uint32)

// The assembly reads a StackProbe's fields at fixed offsets.
var _ = [1]struct{}{}[unsafe.Sizeof(StackProbe{})-32]
var _ = [1]struct{}{}[unsafe.Offsetof(StackProbe{}.fp)-16]
