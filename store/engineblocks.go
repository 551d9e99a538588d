package store

import (
	"encoding/binary"
	"fmt"
)

// EngineBlock is one row of the engine block table: rank Rank of engine
// Worker names a block EngineHash (the engine's own block id) that the
// router knows as sequence hash Seq. KV events that remove blocks carry only
// engine ids, so the FSM keeps this map to translate them.
type EngineBlock struct {
	Worker     uint64
	Rank       uint32
	EngineHash uint64
	Seq        uint64
}

// PutEngineBlock maps a rank's engine block id to a sequence hash,
// replacing any previous mapping.
func (b *Batch) PutEngineBlock(worker uint64, rank uint32, engineHash, seq uint64) {
	b.set(engineKey(worker, rank, engineHash), binary.BigEndian.AppendUint64(nil, seq))
}

// DeleteEngineBlock forgets a rank's engine block id.
func (b *Batch) DeleteEngineBlock(worker uint64, rank uint32, engineHash uint64) {
	b.del(engineKey(worker, rank, engineHash))
}

// DeleteEngineBlocksOfRank drops every engine block id of one rank with a
// single range tombstone.
func (b *Batch) DeleteEngineBlocksOfRank(worker uint64, rank uint32) {
	b.delRange(rankRange(tableEngine, worker, rank))
}

// DeleteEngineBlocksOfWorker drops every engine block id of every rank of
// an engine with a single range tombstone.
func (b *Batch) DeleteEngineBlocksOfWorker(worker uint64) {
	b.delRange(workerRange(tableEngine, worker))
}

// EngineBlock returns the sequence hash a rank's engine block id names, or
// ErrNotFound.
func (s *FSMStore) EngineBlock(worker uint64, rank uint32, engineHash uint64) (uint64, error) {
	e, err := lookup(s, engineKey(worker, rank, engineHash), decodeEngineBlock)
	return e.Seq, err
}

// ScanEngineBlocks calls fn for every engine block row, ordered by worker,
// rank and engine hash.
func (s *FSMStore) ScanEngineBlocks(fn func(EngineBlock) error) error {
	return scanPrefix(s, tableEngine, decodeEngineBlock, fn)
}

// ScanEngineBlocksOfRank calls fn for every engine block id of one rank.
func (s *FSMStore) ScanEngineBlocksOfRank(worker uint64, rank uint32, fn func(EngineBlock) error) error {
	lo, hi := rankRange(tableEngine, worker, rank)
	return scanTable(s, lo, hi, decodeEngineBlock, fn)
}

// decodeEngineBlock decodes an engine block key and value.
func decodeEngineBlock(k, v []byte) (EngineBlock, error) {
	if len(k) != engineKeyLen || k[0] != tableEngine || len(v) != 8 {
		return EngineBlock{}, fmt.Errorf("%w: engine block row %x=%x", ErrCorrupt, k, v)
	}
	return EngineBlock{
		Worker:     binary.BigEndian.Uint64(k[1:]),
		Rank:       binary.BigEndian.Uint32(k[9:]),
		EngineHash: binary.BigEndian.Uint64(k[13:]),
		Seq:        binary.BigEndian.Uint64(v),
	}, nil
}
