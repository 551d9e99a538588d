package index

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestExactConcurrentReadersAndWriter runs one writer applying stored and
// removed events while readers query; it is meant for -race. Each reader
// also checks what it can check without synchronizing with the writer:
// results are sorted, in range, and the always-held root block is found.
func TestExactConcurrentReadersAndWriter(t *testing.T) {
	x := NewExact()
	root := stored(w1, 1, dev, blk(1, 1))
	if err := x.Apply(&root); err != nil {
		t.Fatal(err)
	}
	q := seqs(1, 2, 3, 4, 5, 6)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan string, 8)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]routing.Match, 0, 4)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				dst = x.FindMatches(q, dst[:0])
				if len(dst) == 0 || dst[0].Worker != w1 || dst[0].Total() < 1 || dst[0].Total() > 6 {
					errs <- fmt.Sprintf("reader %d: bad result %v", r, dst)
					return
				}
				_ = x.Stats()
			}
		}()
	}
	r := rand.New(rand.NewPCG(9, 9))
	id := uint64(1)
	for range 3000 {
		id++
		var ev routing.Event
		depth := r.IntN(5) + 2
		if r.IntN(2) == 0 {
			ev = child(w1, id, routing.Tier(r.IntN(3)), uint64(depth-1), blk(uint64(depth), uint64(depth)))
		} else {
			ev = removed(w1, id, routing.Tier(r.IntN(3)), uint64(depth))
		}
		_ = x.Apply(&ev)
		other := stored(routing.Worker{ID: routing.WorkerID(10 + r.IntN(4))}, 0, dev, blk(1, 1))
		_ = x.ReplaceWorker(other.Worker, []routing.Event{other}, id)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	checkInvariants(t, x)
}

// TestApproxConcurrentRecordAndFind records and queries concurrently.
func TestApproxConcurrentRecordAndFind(t *testing.T) {
	a := mustApprox(t, ApproxConfig{MaxBlocks: 64})
	q := seqs(1, 2, 3, 4)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := routing.Worker{ID: routing.WorkerID(g + 1)}
			for i := range 2000 {
				if _, err := a.Record(w, q[:1+i%4], t0); err != nil {
					t.Error(err)
					return
				}
				for _, m := range a.FindMatches(q, t0, nil) {
					if m.Device < 1 || m.Device > 4 {
						t.Errorf("depth %d", m.Device)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
