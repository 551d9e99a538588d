package producer

import "github.com/kvrouter/kvrouter/routing"

// Replace all
//
// A source that resyncs (a snapshot after its stream overran a node's
// ring, or a new node) hands over the pool's whole ownership rather than
// changes. Deleting everything and inserting the snapshot would be exact
// too, since Apply publishes a batch whole, but cuckoo placement depends on
// insertion order and evictions: re-inserting the same blocks moves
// fingerprints between slots and buckets, and the delta would carry a
// large share of the filter for a pool that did not change, possibly past
// MaxDeltaBytes and into a resync of every subscriber. Applying only the
// difference touches exactly the buckets of the blocks that came or went,
// so a resync to an identical state publishes nothing and keeps the
// sequence numbers contiguous.

// replaceAll makes the exact ownership equal to the union of changes (all
// Stored, checked by validate): it drops every held (rank, block) pair
// the changes do not name, then stores the named pairs not held. Removals
// go first so that the filter has its room back before the inserts. It
// returns the number of pairs dropped and stored.
func (p *Producer) replaceAll(changes []Change) (dropped, added int) {
	want := make(map[routing.Worker]map[routing.SeqHash]struct{}, len(changes))
	for _, c := range changes {
		set := want[c.Worker]
		if set == nil {
			set = make(map[routing.SeqHash]struct{}, len(c.Hashes))
			want[c.Worker] = set
		}
		for _, h := range c.Hashes {
			set[h] = struct{}{}
		}
	}
	for w, held := range p.owners {
		for h := range held {
			if _, keep := want[w][h]; !keep {
				p.drop(w, h)
				dropped++
			}
		}
	}
	for w, set := range want {
		for h := range set {
			if _, ok := p.owners[w][h]; !ok {
				p.store(w, h)
				added++
			}
		}
	}
	return dropped, added
}
