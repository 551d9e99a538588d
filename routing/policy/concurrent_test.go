package policy

import (
	"sync"
	"testing"
)

// TestConcurrentSelect runs every selector from several goroutines, each
// with its own Decision; under -race it checks the selectors' locking.
func TestConcurrentSelect(t *testing.T) {
	cands := []Candidate{c(1, 2, 64, 5, 1), c(2, 2, 64, 5, 1), c(3, 0, 96, 5, 2)}
	for _, name := range Names() {
		s, err := New(name, DefaultOptions(rng(1)))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var d Decision
				req := &Request{ISLTokens: 96, BlockSize: 16, Pin: &Pin{Worker: 2}}
				for range 500 {
					if err := s.Select(&d, req, cands); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}
