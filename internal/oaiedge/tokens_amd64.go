package oaiedge

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the vector token parser; tests turn it off to check the
// portable path on the same machine.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasBMI1 && cpu.X86.HasPOPCNT

// plainIDsAVX2 converts plain ids from b[s:] in 64-byte windows, each
// starting at an id: it finds the window's commas, digits and zeros with
// vector compares, keeps the commas before the first irregular position
// (a byte other than a digit or comma, an empty element, a leading zero,
// eight or more digits), and converts the ids they end eight at a time:
// each id's lane is the 8 bytes before its comma, the bytes up to the
// separator are cleared, and multiply-adds combine the digits. It stops
// before a window that would pass limit ids or write past space slots
// (it writes up to 8 slots beyond the ids it keeps), before the last 64
// bytes of b, and where no plain id starts the window. It returns the
// number of ids written to dst and where it stopped, which is s or just
// after a comma. It requires s >= 8, so that every lane lies in b, and
// b[s-1] not a digit, so that the first lane has a separator.
//
//go:noescape
func plainIDsAVX2(dst unsafe.Pointer, limit, space int, b unsafe.Pointer, n, s int) (count, next int)

// plainRunFast is plainRun in vector code where the processor has AVX2:
// about four times faster on a long prompt, where parsing is the largest
// part of the router's own latency. It leaves what it cannot take (the
// last 64 bytes, irregular ids) to plainRun and the general loop, and
// returns dst and i unchanged when it takes nothing.
func plainRunFast(dst []uint32, b []byte, i, limit int) ([]uint32, int) {
	space := cap(dst) - len(dst)
	if !useAVX2 || i < 8 || len(b)-i < 64 || space < 16 || len(dst) >= limit || isDigit(b[i-1]) {
		return dst, i
	}
	at := unsafe.Add(unsafe.Pointer(unsafe.SliceData(dst)), 4*len(dst))
	n, next := plainIDsAVX2(at, limit-len(dst), space, unsafe.Pointer(unsafe.SliceData(b)), len(b), i)
	return dst[:len(dst)+n], next
}
