package load

import (
	"fmt"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestConcurrentUse books, projects and frees from several goroutines; run
// with -race it checks the locking, and the final state checks that no
// update was lost.
func TestConcurrentUse(t *testing.T) {
	tr := newTracker(t, DefaultConfig(16))
	prompt := chain(1, 2, 3, 4)
	matches := []routing.Match{{Worker: w1}, {Worker: w2}}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]routing.Load, 0, 2)
			for i := range 200 {
				id := fmt.Sprintf("g%d-%d", g, i)
				w := matches[i%2].Worker
				if err := tr.Add(Request{ID: id, Worker: w, Hashes: prompt[:i%5], ISLTokens: 80}, t0); err != nil {
					t.Error(err)
					return
				}
				dst, _ = tr.Potential(dst[:0], Query{Hashes: prompt, ISLTokens: 64}, matches)
				_ = tr.AddOutputTokens(id, 3)
				tr.Free(id)
			}
		}()
	}
	wg.Wait()
	assertIdle(t, tr)
}
