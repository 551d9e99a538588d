package fleet

import (
	"github.com/kvrouter/kvrouter/routing/index"
	"testing"
)

// gatedIndex is an exact index that accepts writes only while open, as a
// raft follower's does not.
type gatedIndex struct {
	*exactIndex
	open bool
}

type exactIndex = index.Exact

func (g *gatedIndex) Accepting() bool { return g.open }

// TestIngestGateStandbyAndTakeover checks that a standing-by node ingests
// nothing and requests no snapshot, and that once it accepts, a rank
// whose cursor cannot account for its heartbeats is resynced even when
// it publishes no batch.
func TestIngestGateStandbyAndTakeover(t *testing.T) {
	r := newIngestRig(t, 100)
	g := &gatedIndex{exactIndex: r.idx}
	r.ing = newIngester(g, r.ing.reg, r.ctr, r.ing.log, 100, r.ing.fetch)

	r.ing.reset(1, 1) // a new engine while standing by: no resync
	r.batch(1, 3)
	r.ing.tail(w1, 3)
	r.ing.tail(w1, 3)
	r.expect(0, 0, 0)
	if s := r.ctr.stats(); s.Applied != 0 {
		t.Fatalf("standby applied %d events", s.Applied)
	}

	g.open = true // leadership: the rank published 1..3 meanwhile
	r.ing.tail(w1, 3)
	r.expect(0, 0, 0) // events up to 3 may still be in flight
	r.ing.tail(w1, 3)
	r.expect(0, 0, 1) // a period later they are lost: one resync
	r.answer(3, nil)
	r.batch(4, 5)
	r.expect(5, 5, 1)

	g.open = false // leadership lost mid-stream, then regained
	r.batch(6, 6)
	g.open = true
	r.batch(8, 8) // 7 is gone: a gap against the index's cursor
	r.expect(5, 5, 2)
}
