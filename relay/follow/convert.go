package follow

import (
	"fmt"
	"maps"
	"slices"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// snapshotBuf collects a snapshot's chunks.
type snapshotBuf struct {
	index uint64
	next  uint32
	ranks map[routing.Worker][]routing.SeqHash
	// sessions are the bound sessions' key hashes.
	sessions []uint64
}

// handle checks one message against the stream's order and converts it.
// ok is false for a snapshot chunk that is not the last one.
func (s *Source) handle(msg *kvrpb.OwnershipWatchMessage) (b producer.Batch, ok bool, err error) {
	pos := s.Index()
	if c := msg.GetSnapshot(); c != nil {
		return s.chunk(c, pos)
	}
	wb := msg.GetBatch()
	switch {
	case wb == nil:
		return b, false, fmt.Errorf("%w: empty message", ErrGap)
	case s.snap != nil:
		return b, false, fmt.Errorf("%w: batch %d inside a snapshot", ErrGap, wb.Index)
	case wb.Index <= pos || wb.PrevIndex > pos:
		return b, false, fmt.Errorf("%w: batch %d (prev %d) after index %d", ErrGap, wb.Index, wb.PrevIndex, pos)
	}
	b, err = s.batch(wb)
	return b, err == nil, err
}

// batch converts a wire batch, its session lists included.
func (s *Source) batch(wb *kvrpb.OwnershipBatch) (producer.Batch, error) {
	out := producer.Batch{Index: wb.Index, Changes: make([]producer.Change, len(wb.Changes)),
		Sessions: sessionChanges(wb.SessionsBound, wb.SessionsUnbound)}
	for i, c := range wb.Changes {
		kind, ok := kinds[c.Kind]
		if !ok {
			return producer.Batch{}, fmt.Errorf("%w: batch %d: change kind %v", ErrGap, wb.Index, c.Kind)
		}
		w := routing.Worker{ID: routing.WorkerID(c.EngineId), Rank: c.Rank}
		out.Changes[i] = producer.Change{Kind: kind, Worker: w, Hashes: seqs(c.Hashes)}
	}
	return out, nil
}

// sessionChanges converts a batch's session lists to changes of
// producer.SessionOwner: the unbound first, then the bound (the lists are
// disjoint, so the order does not matter).
func sessionChanges(bound, unbound []uint64) []producer.Change {
	var out []producer.Change
	if len(unbound) > 0 {
		out = append(out, producer.Change{Kind: producer.Removed, Worker: producer.SessionOwner, Hashes: seqs(unbound)})
	}
	if len(bound) > 0 {
		out = append(out, producer.Change{Kind: producer.Stored, Worker: producer.SessionOwner, Hashes: seqs(bound)})
	}
	return out
}

// kinds maps wire change kinds to the producer's.
var kinds = map[kvrpb.OwnershipChangeKind]producer.ChangeKind{
	kvrpb.OwnershipChangeKind_OWNERSHIP_CHANGE_KIND_STORED:         producer.Stored,
	kvrpb.OwnershipChangeKind_OWNERSHIP_CHANGE_KIND_REMOVED:        producer.Removed,
	kvrpb.OwnershipChangeKind_OWNERSHIP_CHANGE_KIND_RANK_CLEARED:   producer.RankCleared,
	kvrpb.OwnershipChangeKind_OWNERSHIP_CHANGE_KIND_WORKER_REMOVED: producer.WorkerRemoved,
}

// chunk adds a snapshot chunk; the last one yields the reset batch.
func (s *Source) chunk(c *kvrpb.OwnershipSnapshotChunk, pos uint64) (producer.Batch, bool, error) {
	if s.snap == nil {
		if c.Seq != 0 || (c.Index <= pos && pos != 0) {
			return producer.Batch{}, false, fmt.Errorf("%w: snapshot chunk %d at %d after index %d", ErrGap, c.Seq, c.Index, pos)
		}
		s.snap = &snapshotBuf{index: c.Index, ranks: map[routing.Worker][]routing.SeqHash{}}
	}
	if c.Seq != s.snap.next || c.Index != s.snap.index {
		return producer.Batch{}, false, fmt.Errorf("%w: snapshot chunk %d at %d, want %d at %d", ErrGap, c.Seq, c.Index, s.snap.next, s.snap.index)
	}
	s.snap.next++
	for _, r := range c.Ranks {
		w := routing.Worker{ID: routing.WorkerID(r.EngineId), Rank: r.Rank}
		s.snap.ranks[w] = append(s.snap.ranks[w], seqs(r.Hashes)...)
	}
	s.snap.sessions = append(s.snap.sessions, c.Sessions...)
	if !c.Last {
		return producer.Batch{}, false, nil
	}
	b := s.reset(s.snap)
	s.snap = nil
	s.count(func(st *Stats) { st.Snapshots++ })
	return b, true, nil
}

// reset builds the replacing batch of a snapshot: every snapshot row
// stored, sorted by rank so that the batch is deterministic, and every
// bound session stored by producer.SessionOwner. The producer applies only
// its difference from what it holds (producer.Batch.Replace), so a resync
// to an unchanged state publishes nothing.
func (s *Source) reset(snap *snapshotBuf) producer.Batch {
	b := producer.Batch{Index: snap.index, Replace: true}
	ranks := slices.SortedFunc(maps.Keys(snap.ranks), routing.Worker.Compare)
	for _, w := range ranks {
		b.Changes = append(b.Changes, producer.Change{Kind: producer.Stored, Worker: w, Hashes: snap.ranks[w]})
	}
	if len(snap.sessions) > 0 {
		b.Sessions = []producer.Change{{Kind: producer.Stored, Worker: producer.SessionOwner, Hashes: seqs(snap.sessions)}}
	}
	return b
}

// seqs converts wire hashes to sequence hashes.
func seqs(hs []uint64) []routing.SeqHash {
	if len(hs) == 0 {
		return nil
	}
	out := make([]routing.SeqHash, len(hs))
	for i, h := range hs {
		out[i] = routing.SeqHash(h)
	}
	return out
}
