package index

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// applyBody applies a validated event to the worker in slot, ignoring its
// id. Only a stored event with an unknown parent fails, and it then changes
// nothing.
func (e *Exact) applyBody(slot uint32, ev *routing.Event) error {
	bit := uint8(1) << ev.Tier
	switch ev.Kind {
	case routing.EventStored:
		return e.store(slot, ev, bit)
	case routing.EventRemoved:
		e.removeAll(slot, ev.Removed, bit)
	case routing.EventCleared:
		e.clearWorker(slot)
	}
	return nil
}

// store places a stored event's blocks. The first block chains on the
// parent's sequence hash, or starts a sequence when there is no parent;
// each following block chains on the one before.
func (e *Exact) store(slot uint32, ev *routing.Event, bit uint8) error {
	st := &e.workers[slot]
	var prev routing.SeqHash
	if ev.HasParent {
		p, ok := st.engines.get(uint64(ev.Parent))
		if !ok {
			e.stats.unknownParents++
			return fmt.Errorf("%w: worker %v event %d parent %#x", ErrUnknownParent, st.w, ev.ID, uint64(ev.Parent))
		}
		prev = p
	}
	hs := e.seqBuf[:0]
	for i, b := range ev.Blocks {
		seq := routing.SeqHash(b.Local)
		if i > 0 || ev.HasParent {
			seq = routing.Chain(prev, b.Local)
		}
		hs = append(hs, seq)
		prev = seq
	}
	e.seqBuf = hs
	var sink uint64
	for i, b := range ev.Blocks {
		sink += st.engines.touch(uint64(b.Engine)) + e.blocks.touch(uint64(hs[i]))
	}
	e.sink = sink
	for i, b := range ev.Blocks {
		e.storeBlock(slot, b.Engine, hs[i], bit)
	}
	return nil
}

// removeAll drops the blocks named by ids from the tier, resolving and
// touching them in batches first (see table.touch).
func (e *Exact) removeAll(slot uint32, ids []routing.EngineHash, bit uint8) {
	st := &e.workers[slot]
	var sink uint64
	for _, eh := range ids {
		sink += st.engines.touch(uint64(eh))
	}
	for _, eh := range ids {
		if seq, ok := st.engines.get(uint64(eh)); ok {
			sink += e.blocks.touch(uint64(seq))
		}
	}
	e.sink = sink
	for _, eh := range ids {
		e.remove(slot, eh, bit)
	}
}

// storeBlock records that the worker holds seq on the tier under engine id
// eh. An engine id names one block at a time: when it named another block
// before, the engine has reused it, so the old block is gone from every
// tier of that worker.
func (e *Exact) storeBlock(slot uint32, eh routing.EngineHash, seq routing.SeqHash, bit uint8) {
	st := &e.workers[slot]
	ep, had := st.engines.upsert(uint64(eh))
	old := *ep
	*ep = seq
	if had && old != seq {
		e.setTiers(slot, old, 0)
	}
	p, _ := e.blocks.upsert(uint64(seq))
	t := e.lists.tiers(p, slot) | bit
	was := e.lists.set(p, slot, t)
	if was == 0 {
		e.pairs++
	}
	e.countShared(was, t)
}

// countShared keeps the count of (worker, block) pairs on the shared tier
// as a pair's tiers change from old to t.
func (e *Exact) countShared(old, t uint8) {
	switch {
	case old&sharedBit == 0 && t&sharedBit != 0:
		e.sharedPairs++
	case old&sharedBit != 0 && t&sharedBit == 0:
		e.sharedPairs--
	}
}

// remove drops the block named by eh from the tier. An id that does not
// resolve to a block held on that tier is counted and otherwise ignored, so
// removals are idempotent. The engine id is forgotten once the worker holds
// the block on no tier.
func (e *Exact) remove(slot uint32, eh routing.EngineHash, bit uint8) {
	st := &e.workers[slot]
	seq, ok := st.engines.get(uint64(eh))
	if !ok {
		e.stats.unknownRemovals++
		return
	}
	t := e.tiersOf(slot, seq)
	if t&bit == 0 {
		e.stats.unknownRemovals++
	}
	if t &^= bit; t == 0 {
		st.engines.del(uint64(eh))
	}
	e.setTiers(slot, seq, t)
}

// tiersOf returns the tier bits slot holds for seq.
func (e *Exact) tiersOf(slot uint32, seq routing.SeqHash) uint8 {
	p := e.blocks.ptr(uint64(seq))
	if p == nil {
		return 0
	}
	return e.lists.tiers(p, slot)
}

// setTiers makes slot hold seq on exactly the tiers t, keeping the pair
// count and dropping blocks nobody holds.
func (e *Exact) setTiers(slot uint32, seq routing.SeqHash, t uint8) {
	p := e.blocks.ptr(uint64(seq))
	if p == nil {
		if t == 0 {
			return
		}
		p, _ = e.blocks.upsert(uint64(seq))
	}
	old := e.lists.set(p, slot, t)
	switch {
	case old == 0 && t != 0:
		e.pairs++
	case old != 0 && t == 0:
		e.pairs--
	}
	e.countShared(old, t)
	if p.empty() {
		e.blocks.del(uint64(seq))
	}
}

// clearWorker drops every block the worker holds and its engine-id map;
// the cursor stays.
func (e *Exact) clearWorker(slot uint32) {
	st := &e.workers[slot]
	st.engines.each(func(_ uint64, seq *routing.SeqHash) bool {
		e.setTiers(slot, *seq, 0)
		return true
	})
	st.engines.reset()
}
