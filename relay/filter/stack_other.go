//go:build !amd64 || purego || race

package filter

// haveRowMatch is false: rows are matched a word at a time. Race builds
// take this path too, so that the race detector sees every read of the
// rows, which it cannot in assembly.
const haveRowMatch = false

// hitsAVX2 is not used without AVX2.
func hitsAVX2(rows *uint64, ps *StackProbe, n int, chunks int, masks *uint32) {
	panic("filter: hitsAVX2 without AVX2")
}
