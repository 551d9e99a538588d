package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/raft"
)

// logCodecVersion is the first byte of every encoded raft.Log. A new layout
// gets a new number; old numbers stay decodable.
const logCodecVersion byte = 1

// logHeaderLen is version ‖ BE64 index ‖ BE64 term ‖ type ‖ BE64 appendedAt.
const logHeaderLen = 1 + 8 + 8 + 1 + 8

// zeroTimeNanos stands for the zero time.Time, whose UnixNano is undefined.
const zeroTimeNanos = math.MinInt64

// encodeLog appends the fixed binary encoding of l to dst: the header, then
// the data and the extensions, each prefixed with its uvarint length. The
// index is repeated from the key so a misplaced value is detected.
func encodeLog(dst []byte, l *raft.Log) []byte {
	var hdr [logHeaderLen]byte
	hdr[0] = logCodecVersion
	binary.BigEndian.PutUint64(hdr[1:], l.Index)
	binary.BigEndian.PutUint64(hdr[9:], l.Term)
	hdr[17] = byte(l.Type)
	binary.BigEndian.PutUint64(hdr[18:], uint64(timeToNanos(l.AppendedAt)))
	dst = append(dst, hdr[:]...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	return append(dst, l.Extensions...)
}

// decodeLog decodes buf into l, copying the data and extensions so l stays
// valid after Pebble reuses buf.
func decodeLog(buf []byte, l *raft.Log) error {
	if len(buf) < logHeaderLen || buf[0] != logCodecVersion {
		return fmt.Errorf("%w: raft log header (%d bytes)", ErrCorrupt, len(buf))
	}
	l.Index = binary.BigEndian.Uint64(buf[1:])
	l.Term = binary.BigEndian.Uint64(buf[9:])
	l.Type = raft.LogType(buf[17])
	l.AppendedAt = nanosToTime(int64(binary.BigEndian.Uint64(buf[18:])))
	rest := buf[logHeaderLen:]
	var err error
	if l.Data, rest, err = takeBytes(rest); err != nil {
		return err
	}
	if l.Extensions, rest, err = takeBytes(rest); err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d trailing bytes after raft log %d", ErrCorrupt, len(rest), l.Index)
	}
	return nil
}

// takeBytes splits a uvarint-length-prefixed byte string off buf and
// returns a copy of it (nil when empty, as raft produces).
func takeBytes(buf []byte) (val, rest []byte, err error) {
	n, w := binary.Uvarint(buf)
	if w <= 0 || n > uint64(len(buf)-w) {
		return nil, nil, fmt.Errorf("%w: length prefix", ErrCorrupt)
	}
	buf = buf[w:]
	if n > 0 {
		val = append([]byte(nil), buf[:n]...)
	}
	return val, buf[n:], nil
}

// timeToNanos encodes t as Unix nanoseconds, the zero time as zeroTimeNanos.
func timeToNanos(t time.Time) int64 {
	if t.IsZero() {
		return zeroTimeNanos
	}
	return t.UnixNano()
}

// nanosToTime inverts timeToNanos.
func nanosToTime(n int64) time.Time {
	if n == zeroTimeNanos {
		return time.Time{}
	}
	return time.Unix(0, n)
}
