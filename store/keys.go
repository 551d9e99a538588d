package store

import (
	"encoding/binary"
	"fmt"
)

// The one-byte key prefixes. The raft log instance uses prefixLog and
// prefixStable; the FSM instance uses the table prefixes. Each prefix's
// exclusive upper bound is the next byte value, so every iterator is bounded
// by [p, p+1).
const (
	prefixLog    byte = 'l'
	prefixStable byte = 's'

	tableCursor     byte = 'c'
	tableEngine     byte = 'e'
	tableIncumbent  byte = 'i'
	tableMeta       byte = 'm'
	tableOwner      byte = 'o'
	tableRequestID  byte = 'q'
	tableRequestSeq byte = 'r'
	tableSession    byte = 's'
	tableThreshold  byte = 't'
	tableWorker     byte = 'w'
)

// Fixed key lengths, prefix included.
const (
	logKeyLen    = 1 + 8
	ownerKeyLen  = 1 + 8 + 4 + 8
	cursorKeyLen = 1 + 8 + 4
	workerKeyLen = 1 + 8
	engineKeyLen = 1 + 8 + 4 + 8
	reqSeqKeyLen = 1 + 8
)

// The meta keys. metaApplied holds the applied index and term together so
// that one key, written in the same batch as the data, describes the data.
var (
	metaApplied = []byte{tableMeta, 'a'}
	metaVersion = []byte{tableMeta, 'v'}
)

// prefixBounds returns the bounds [p, p+1) of a one-byte prefix.
func prefixBounds(p byte) (lower, upper []byte) {
	return []byte{p}, []byte{p + 1}
}

// logKey encodes 'l' ‖ BE64(index); big-endian makes byte order equal
// numeric order, so iteration walks the log in index order.
func logKey(index uint64) []byte { return u64Key(prefixLog, index) }

// parseLogKey decodes a log key; a wrong length is corruption.
func parseLogKey(k []byte) (uint64, error) {
	if len(k) != logKeyLen || k[0] != prefixLog {
		return 0, fmt.Errorf("%w: log key %x", ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// stableKey encodes 's' ‖ key.
func stableKey(key []byte) []byte { return append([]byte{prefixStable}, key...) }

// ownerKey encodes 'o' ‖ BE64(worker) ‖ BE32(rank) ‖ BE64(hash). The worker
// comes first so that all blocks of one rank are one contiguous range.
func ownerKey(worker uint64, rank uint32, hash uint64) []byte {
	return binary.BigEndian.AppendUint64(rankKey(tableOwner, worker, rank), hash)
}

// cursorKey encodes 'c' ‖ BE64(worker) ‖ BE32(rank).
func cursorKey(worker uint64, rank uint32) []byte { return rankKey(tableCursor, worker, rank) }

// workerKey encodes 'w' ‖ BE64(worker).
func workerKey(worker uint64) []byte { return u64Key(tableWorker, worker) }

// sessionKey encodes 's' ‖ key bytes.
func sessionKey(key string) []byte { return append([]byte{tableSession}, key...) }

// engineKey encodes 'e' ‖ BE64(worker) ‖ BE32(rank) ‖ BE64(engine hash),
// laid out like ownerKey so a rank's and a worker's ids are contiguous.
func engineKey(worker uint64, rank uint32, engineHash uint64) []byte {
	return binary.BigEndian.AppendUint64(rankKey(tableEngine, worker, rank), engineHash)
}

// requestSeqKey encodes 'r' ‖ BE64(seq); byte order is insertion order.
func requestSeqKey(seq uint64) []byte { return u64Key(tableRequestSeq, seq) }

// requestIDKey encodes 'q' ‖ request id bytes.
func requestIDKey(id string) []byte { return append([]byte{tableRequestID}, id...) }

// u64Key encodes table ‖ BE64(v).
func u64Key(table byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, 1+8), table), v)
}

// rankKey encodes table ‖ BE64(worker) ‖ BE32(rank), with room for the
// BE64 that ownerKey and engineKey append.
func rankKey(table byte, worker uint64, rank uint32) []byte {
	k := binary.BigEndian.AppendUint64(append(make([]byte, 0, ownerKeyLen), table), worker)
	return binary.BigEndian.AppendUint32(k, rank)
}

// rankRange returns the bounds of every key of one rank in a table laid
// out like ownerKey.
func rankRange(table byte, worker uint64, rank uint32) (lower, upper []byte) {
	lower = rankKey(table, worker, rank)
	return lower, successor(lower)
}

// workerRange returns the bounds of every key of one worker in a table
// laid out like ownerKey.
func workerRange(table byte, worker uint64) (lower, upper []byte) {
	lower = u64Key(table, worker)
	return lower, successor(lower)
}

// successor returns the smallest key greater than every key that starts with
// p, or nil when p is all 0xff bytes (no upper bound exists).
func successor(p []byte) []byte {
	s := append([]byte(nil), p...)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != 0xff {
			s[i]++
			return s[:i+1]
		}
	}
	return nil
}
