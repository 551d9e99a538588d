package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// MaxCardBytes bounds an engine card. Cards are small protobufs; the bound
// stops a malformed registration from bloating every snapshot.
const MaxCardBytes = 64 << 10

// Batch collects FSM writes that commit atomically with the applied index.
// A Batch belongs to one goroutine. The first invalid write is remembered
// and returned by Commit, which then writes nothing.
type Batch struct {
	s   *FSMStore
	gen *generation
	b   *pebble.Batch
	err error
}

// NewBatch starts a batch against the live state. It never fails; a closed
// store surfaces as ErrClosed from Commit.
func (s *FSMStore) NewBatch() *Batch {
	g, err := s.current()
	if err != nil {
		return &Batch{s: s, err: err}
	}
	return &Batch{s: s, gen: g, b: g.db.NewBatch()}
}

// record keeps the first error of the batch.
func (b *Batch) record(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

// set writes key=val unless the batch already failed, so a Put records
// its argument's error and calls set, which then writes nothing.
func (b *Batch) set(key, val []byte) {
	if b.err == nil {
		b.record(b.b.Set(key, val, nil))
	}
}

// del deletes key unless the batch already failed.
func (b *Batch) del(key []byte) {
	if b.err == nil {
		b.record(b.b.Delete(key, nil))
	}
}

// delRange deletes [lo, hi) unless the batch already failed.
func (b *Batch) delRange(lo, hi []byte) {
	if b.err == nil {
		b.record(b.b.DeleteRange(lo, hi, nil))
	}
}

// PutOwner records that a rank holds a block on the given tiers, replacing
// any previous mask. An empty mask is refused: use DeleteOwner.
func (b *Batch) PutOwner(worker uint64, rank uint32, hash uint64, tiers TierMask) {
	if tiers == 0 {
		b.record(fmt.Errorf("%w: empty tier mask for block %x", ErrInvalidArgument, hash))
	}
	b.set(ownerKey(worker, rank, hash), []byte{byte(tiers)})
}

// DeleteOwner records that a rank no longer holds a block.
func (b *Batch) DeleteOwner(worker uint64, rank uint32, hash uint64) {
	b.del(ownerKey(worker, rank, hash))
}

// DeleteOwnersOfRank drops every block of one rank (an engine's "all blocks
// cleared" event) with a single range tombstone.
func (b *Batch) DeleteOwnersOfRank(worker uint64, rank uint32) {
	b.delRange(rankRange(tableOwner, worker, rank))
}

// DeleteOwnersOfWorker drops every block of every rank of an engine.
func (b *Batch) DeleteOwnersOfWorker(worker uint64) {
	b.delRange(workerRange(tableOwner, worker))
}

// PutWorker stores an engine's card.
func (b *Batch) PutWorker(worker uint64, card []byte) {
	if len(card) > MaxCardBytes {
		b.record(fmt.Errorf("%w: card of %d bytes (max %d)", ErrInvalidArgument, len(card), MaxCardBytes))
	}
	b.set(workerKey(worker), card)
}

// DeleteWorker removes an engine's card.
func (b *Batch) DeleteWorker(worker uint64) { b.del(workerKey(worker)) }

// PutCursor stores the last applied event id of a rank.
func (b *Batch) PutCursor(worker uint64, rank uint32, eventID uint64) {
	b.set(cursorKey(worker, rank), binary.BigEndian.AppendUint64(nil, eventID))
}

// DeleteCursor removes a rank's cursor.
func (b *Batch) DeleteCursor(worker uint64, rank uint32) { b.del(cursorKey(worker, rank)) }

// PutSession stores a binding under s.Key.
func (b *Batch) PutSession(s Session) {
	b.record(s.validate())
	b.set(sessionKey(s.Key), encodeSession(&s))
}

// DeleteSession removes a binding.
func (b *Batch) DeleteSession(key string) { b.del(sessionKey(key)) }

// Commit writes the batch together with the applied index and term, without
// syncing the WAL (the raft log replays it). index must exceed the applied
// index. Commit releases the batch whatever the outcome, except
// ErrDiskFull: then nothing was written and the batch stays open, so the
// caller may add the next entries' writes to it and commit them all, at
// the later index, once space returns.
func (b *Batch) Commit(index, term uint64) error {
	if b.err == nil && b.s.guard != nil {
		if err := b.s.guard.check(); err != nil {
			return err
		}
	}
	defer b.Close()
	if b.err != nil {
		return b.err
	}
	s := b.s
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	return s.withGen(func(g *generation) error {
		if g != b.gen {
			return ErrStaleBatch
		}
		if cur := g.applied.Load(); index <= cur.index {
			return fmt.Errorf("%w: %d after %d", ErrIndexRegressed, index, cur.index)
		}
		a := applied{index, term}
		if err := b.b.Set(metaApplied, encodeApplied(a), nil); err != nil {
			return err
		}
		if err := b.b.Commit(pebble.NoSync); err != nil {
			s.guard.writeFailed(err)
			return fmt.Errorf("store: commit fsm batch at %d: %w", index, err)
		}
		g.applied.Store(&a)
		return nil
	})
}

// Close abandons an uncommitted batch. It is idempotent.
func (b *Batch) Close() {
	if b.b != nil {
		err := b.b.Close()
		b.record(err)
		b.b = nil
	}
	if b.gen != nil {
		b.record(b.gen.release())
		b.gen = nil
	}
	if b.err == nil {
		b.err = errBatchDone
	}
}

// errBatchDone marks a batch that was committed or closed.
var errBatchDone = errors.New("store: batch already committed or closed")
