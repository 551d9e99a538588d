//go:build !amd64

package oaiedge

// useAVX2 is false off amd64: plainRun alone parses token arrays.
var useAVX2 = false

// plainRunFast takes nothing off amd64.
func plainRunFast(dst []uint32, _ []byte, i, _ int) ([]uint32, int) { return dst, i }
