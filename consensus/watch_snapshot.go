package consensus

import (
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// ownedLister is implemented by States that can list a rank's owned
// hashes directly; others are read through Blocks and Tiers.
type ownedLister interface {
	appendOwned(dst []routing.SeqHash, w routing.Worker) []routing.SeqHash
}

// appendOwned appends the hashes w holds on any tier. SetTiers deletes a
// hash whose tiers become 0, so every hash in the tiers table is owned.
// StoreState inherits it from its embedded MemState.
func (s *MemState) appendOwned(dst []routing.SeqHash, w routing.Worker) []routing.SeqHash {
	r, ok := s.ranks[w]
	if !ok {
		return dst
	}
	dst = slices.Grow(dst, len(r.tiers))
	for seq, t := range r.tiers {
		if t != 0 {
			dst = append(dst, seq)
		}
	}
	return dst
}

// Ownership returns the FSM's change log (see OwnershipLog).
func (f *FSM) Ownership() *OwnershipLog { return f.watch }

// OwnershipSnapshot returns every ownership row and the hash of every
// bound session key at the FSM's applied index. It holds the FSM's read lock while it copies the rows (apply
// waits for that long: about 16 ms per million rows on 2 cores, see
// BenchmarkOwnershipSnapshot), so the rows, the index and the change log
// agree: every batch at or below Index is in the log (or was evicted), and
// every batch above it is pushed after the snapshot was taken.
func (f *FSM) OwnershipSnapshot() OwnershipSnapshot {
	f.mu.RLock()
	snap := OwnershipSnapshot{Index: f.applied}
	var ranks []routing.Worker
	f.st.Ranks(func(w routing.Worker, _ uint64) bool { ranks = append(ranks, w); return true })
	lister, direct := f.st.(ownedLister)
	for _, w := range ranks {
		var hs []routing.SeqHash
		if direct {
			hs = lister.appendOwned(nil, w)
		} else {
			hs = f.ownedByBlocks(w)
		}
		if len(hs) > 0 {
			snap.Ranks = append(snap.Ranks, OwnershipRank{Worker: w, Hashes: hs})
		}
	}
	snap.Sessions = f.sessionHashes()
	f.mu.RUnlock()
	slices.Sort(snap.Sessions)
	slices.SortFunc(snap.Ranks, func(a, b OwnershipRank) int { return a.Worker.Compare(b.Worker) })
	return snap
}

// ownedByBlocks lists w's owned hashes through the State interface: every
// owned hash is named by at least one engine block id. Callers hold mu.
func (f *FSM) ownedByBlocks(w routing.Worker) []routing.SeqHash {
	seen := map[routing.SeqHash]struct{}{}
	var out []routing.SeqHash
	f.st.Blocks(w, func(_ routing.EngineHash, seq routing.SeqHash) bool {
		if _, dup := seen[seq]; !dup && f.st.Tiers(w, seq) != 0 {
			seen[seq] = struct{}{}
			out = append(out, seq)
		}
		return true
	})
	return out
}
