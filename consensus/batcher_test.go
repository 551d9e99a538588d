package consensus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// TestBatcherRunPipelinesInOrder feeds small entries through a running
// leader batcher, so that several are in flight at once, and checks that
// every rank's events applied on every node without a gap: a reordered
// entry would leave a cursor short of the last id. An entry whose
// proposal fails (a leadership change on a loaded machine) is dropped by
// design (Flush), leaving a gap that only the engine's resync fills; the
// order is checked on an attempt in which every entry committed.
func TestBatcherRunPipelinesInOrder(t *testing.T) {
	for attempt := 1; !pipelinedInOrder(t); attempt++ {
		if attempt == 3 {
			t.Fatal("an entry failed to commit in every attempt")
		}
		t.Logf("attempt %d: an entry failed to commit; again on a fresh cluster", attempt)
	}
}

// pipelinedInOrder is one attempt of TestBatcherRunPipelinesInOrder; it
// returns false when an entry failed to commit.
func pipelinedInOrder(t *testing.T) bool {
	c := newCluster(t, 3)
	l := c.leader()
	b := NewBatcher(c.nodes[l], BatcherConfig{Interval: time.Millisecond, EntryBytes: 1 << 10, BacklogBytes: 1 << 20, InFlight: 3})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { b.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	const ranks, rounds = 4, 40
	for id := uint64(1); id <= rounds*2; id += 2 {
		for r := range ranks {
			w := routing.Worker{ID: routing.WorkerID(r + 1)}
			if err := b.Add(kvEvents(w, id, 2, id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r := range ranks {
		w := routing.Worker{ID: routing.WorkerID(r + 1)}
		for _, n := range c.nodes {
			waittest.UntilNil(t, 10*time.Second, fmt.Sprintf("node %s applied rank %v's events", n.ID(), w), func() error {
				if cur, _ := n.FSM().Cursor(w); cur != rounds*2 && b.failed.Load() == 0 {
					return fmt.Errorf("cursor %d, want %d", cur, rounds*2)
				}
				return nil
			})
			if b.failed.Load() != 0 {
				return false
			}
		}
	}
	hs := c.converge()
	if hs[0] != hs[1] || hs[1] != hs[2] {
		t.Fatalf("state hashes differ: %x", hs)
	}
	return true
}

// fakeProposal is a proposal whose wait blocks until release is closed.
func fakeProposal(release chan struct{}, err error) proposal {
	return proposal{batches: 1, wait: func() (*kvrpb.RaftResult, error) {
		<-release
		return &kvrpb.RaftResult{}, err
	}}
}

// TestPipeBoundsInFlight checks that admit waits while InFlight proposals
// are unresolved, frees a slot when the oldest resolves, that every
// proposal is reported with its batches and outcome, and that close
// waits for the rest.
func TestPipeBoundsInFlight(t *testing.T) {
	var done int
	var failures []error
	p := newPipe(2, func(batches int, err error) {
		if err != nil {
			failures = append(failures, err)
			return
		}
		done += batches
	})
	ctx := context.Background()
	rel := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	for i := range 2 {
		if err := p.admit(ctx); err != nil {
			t.Fatal(err)
		}
		p.push(fakeProposal(rel[i], nil))
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := p.admit(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third admit with two in flight: %v, want a wait", err)
	}
	close(rel[0])
	if err := p.admit(ctx); err != nil {
		t.Fatal(err)
	}
	p.push(fakeProposal(rel[2], errors.New("lost")))
	close(rel[1])
	close(rel[2])
	p.close()
	if len(failures) != 1 || done != 2 {
		t.Fatalf("failures %v, done %d; want the one failed proposal and 2 batches", failures, done)
	}
}
