//go:build linux && amd64

package oaiedge

import (
	"syscall"
	"testing"
)

// TestPlainRunFastStaysInBounds parses bodies that end exactly where an
// inaccessible page begins, with every length of trailing id text, for
// both parsers: a read past the end of the body faults and fails the
// test instead of going unnoticed.
func TestPlainRunFastStaysInBounds(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer func() { _ = syscall.Munmap(mem) }()
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	forEachParser(t, func(t *testing.T) {
		for tail := range 80 {
			text := `{"model":"m","prompt":[1234567,`
			for len(text) < 300+tail {
				text += "98765,"
			}
			text += "1]}"
			body := mem[page-len(text) : page]
			copy(body, text)
			if _, err := completions(body, 1<<20, nil); err != nil {
				t.Fatalf("tail %d: %v", tail, err)
			}
		}
	})
}
