package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// restoreBatchRecords bounds the records per Pebble batch during a restore,
// keeping batches a few MiB.
const restoreBatchRecords = 1 << 16

// Restore replaces the FSM state with the snapshot read from r. It loads the
// stream into a fresh generation directory, verifies the header, every
// record, the counts and the checksum, flushes the new state to sstables,
// and only then points LIVE at it and swaps it in. On any error the live
// state is untouched; a malformed stream yields an error wrapping
// ErrCorrupt. Restore waits for in-flight commits and blocks new ones.
func (s *FSMStore) Restore(r io.Reader) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	cur, err := s.current()
	if err != nil {
		return err
	}
	nextID := cur.id + 1
	if err := cur.release(); err != nil {
		return err
	}
	fresh, err := openGeneration(&s.opts, nextID, true)
	if err != nil {
		return err
	}
	if err := load(fresh, r); err != nil {
		return errors.Join(err, fresh.discard())
	}
	if err := writeLive(s.opts.FS, s.opts.Dir, fresh.id); err != nil {
		return errors.Join(err, fresh.discard())
	}
	return s.swap(fresh)
}

// swap installs g as the live generation and retires the old one.
func (s *FSMStore) swap(g *generation) error {
	s.mu.Lock()
	old := s.gen
	s.gen = g
	s.mu.Unlock()
	if old == nil {
		return errors.Join(ErrClosed, g.discard())
	}
	return old.discard()
}

// load reads a whole snapshot stream into g and makes it durable.
func load(g *generation, r io.Reader) error {
	sr := newSnapReader(r)
	a, err := sr.header()
	if err != nil {
		return err
	}
	var counts [len(snapTables)]uint64
	b := g.db.NewBatch()
	defer func() { _ = b.Close() }()
	for pending := 0; ; pending++ {
		tag, err := sr.ReadByte()
		if err != nil {
			return corrupt("record tag", err)
		}
		if tag == snapEnd {
			break
		}
		if err := loadRecord(sr, b, tag, &counts); err != nil {
			return err
		}
		if pending == restoreBatchRecords {
			if err := commitRestoreBatch(b); err != nil {
				return err
			}
			b.Reset()
			pending = 0
		}
	}
	if err := sr.trailer(counts); err != nil {
		return err
	}
	return finishLoad(g, b, a)
}

// loadRecord reads, validates and stages one record.
func loadRecord(sr *snapReader, b *pebble.Batch, tag byte, counts *[len(snapTables)]uint64) error {
	i := bytes.IndexByte(sr.tables, tag) // among the tables of the stream's version
	if i < 0 {
		return fmt.Errorf("%w: snapshot record tag 0x%02x", ErrCorrupt, tag)
	}
	k, err := sr.lenPrefixed(MaxSessionKeyBytes, "record key")
	if err != nil {
		return err
	}
	v, err := sr.lenPrefixed(maxSnapValueBytes, "record value")
	if err != nil {
		return err
	}
	key := append([]byte{tag}, k...)
	if err := validateRow(key, v); err != nil {
		return err
	}
	counts[i]++
	if err := b.Set(key, v, nil); err != nil {
		return err
	}
	return indexRow(b, key, v)
}

// indexRow stages the derived rows of a restored row: a request's lookup
// key. Rows arrive in FIFO order, so a repeated id ends up naming its
// newest row, as PutRequest leaves it.
func indexRow(b *pebble.Batch, k, v []byte) error {
	if k[0] != tableRequestSeq {
		return nil
	}
	r, err := decodeRequest(k, v)
	if err != nil {
		return err
	}
	return b.Set(requestIDKey(r.ID), binary.BigEndian.AppendUint64(nil, r.Seq), nil)
}

// validateRow decodes a row with its table's decoder, so a restore refuses
// what a later read would reject.
func validateRow(k, v []byte) error {
	var err error
	switch k[0] {
	case tableOwner:
		_, err = decodeOwner(k, v)
	case tableCursor:
		_, err = decodeCursor(k, v)
	case tableWorker:
		_, err = decodeWorker(k, v)
	case tableSession:
		_, err = decodeSessionRow(k, v)
	case tableEngine:
		_, err = decodeEngineBlock(k, v)
	case tableRequestSeq:
		_, err = decodeRequest(k, v)
	case tableThreshold:
		_, err = decodeThreshold(k, v)
	case tableIncumbent:
		_, err = decodeIncumbent(k, v)
	}
	return err
}

// commitRestoreBatch commits a partial restore batch without a sync: the
// final Flush makes the whole generation durable at once.
func commitRestoreBatch(b *pebble.Batch) error {
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: restore batch: %w", err)
	}
	return nil
}

// finishLoad writes the applied index with the last records and flushes the
// memtable to sstables, so the new generation is durable before LIVE names
// it (the raft log may no longer hold the entries it covers).
func finishLoad(g *generation, b *pebble.Batch, a applied) error {
	if err := b.Set(metaApplied, encodeApplied(a), nil); err != nil {
		return err
	}
	if err := commitRestoreBatch(b); err != nil {
		return err
	}
	if err := g.db.Flush(); err != nil {
		return fmt.Errorf("store: flush restored state: %w", err)
	}
	g.applied.Store(&a)
	return nil
}
