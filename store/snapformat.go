package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/zeebo/xxh3"
)

// The snapshot stream format, independent of Pebble's on-disk format:
//
//	header  = magic[8] ‖ BE32 version ‖ BE64 index ‖ BE64 term ‖ BE64 xxh3(preceding header bytes)
//	record  = table byte ‖ uvarint len(key) ‖ key ‖ uvarint len(value) ‖ value
//	trailer = 0x00 ‖ BE64 count per table (snapTables order) ‖ BE64 xxh3(every preceding byte)
//
// The key is the table key without its prefix byte. The header has its own
// checksum so a damaged version field reads as corruption, not as a newer
// format.
//
// Each version appends tables to snapTables, so that an older stream is
// exactly a current stream restricted to its version's leading tables:
// restore still reads it (the newer tables come back empty). Version 2
// added the engine block table ('e') and the remembered-request FIFO
// ('r'), version 3 the runtime thresholds table ('t'), version 4 the
// worker-set incumbents table ('i'). The request lookup table ('q') is
// not streamed: restore rebuilds it from the 'r' rows, so a snapshot
// cannot carry a lookup that disagrees with its FIFO.
var snapMagic = [8]byte{'K', 'V', 'R', 'F', 'S', 'M', 'S', 'N'}

// snapVersion is the current snapshot format version.
const snapVersion uint32 = 4

// snapVersionV1 is the oldest version restore reads; its streams carry
// only the first snapTablesV1 tables of snapTables. Version 3 streams
// carry the first snapTablesV3.
const (
	snapVersionV1 uint32 = 1
	snapTablesV1         = 4
	snapVersionV3 uint32 = 3
	snapTablesV3         = 7
)

// snapVersionTables maps every version restore reads to the number of
// leading snapTables its streams carry.
var snapVersionTables = map[uint32]int{snapVersionV1: snapTablesV1, 2: 6, snapVersionV3: snapTablesV3, snapVersion: len(snapTables)}

// snapEnd tags the trailer; it is no table prefix.
const snapEnd byte = 0x00

// snapHeaderLen is the header length including its checksum.
const snapHeaderLen = 8 + 4 + 8 + 8 + 8

// snapTables lists the tables a snapshot carries, in stream order.
// New tables are appended, never inserted, so that older versions'
// trailers are a prefix of the current one.
var snapTables = [...]byte{tableCursor, tableOwner, tableSession, tableWorker, tableEngine, tableRequestSeq, tableThreshold, tableIncumbent}

// maxSnapValueBytes bounds a record value on read, so a damaged length
// prefix cannot trigger a huge allocation.
const maxSnapValueBytes = MaxCardBytes

// snapWriter writes the stream through a hash and a buffer, keeping the
// first error and the per-table record counts.
type snapWriter struct {
	w      *bufio.Writer
	h      *xxh3.Hasher
	n      int64
	err    error
	counts [len(snapTables)]uint64
}

// newSnapWriter wraps w.
func newSnapWriter(w io.Writer) *snapWriter {
	return &snapWriter{w: bufio.NewWriterSize(w, 256<<10), h: xxh3.New()}
}

// write hashes and writes p.
func (sw *snapWriter) write(p []byte) {
	if sw.err != nil {
		return
	}
	_, _ = sw.h.Write(p)
	n, err := sw.w.Write(p)
	sw.n += int64(n)
	sw.err = err
}

// header writes the header.
func (sw *snapWriter) header(a applied) {
	h := make([]byte, 0, snapHeaderLen)
	h = append(h, snapMagic[:]...)
	h = binary.BigEndian.AppendUint32(h, snapVersion)
	h = binary.BigEndian.AppendUint64(h, a.index)
	h = binary.BigEndian.AppendUint64(h, a.term)
	h = binary.BigEndian.AppendUint64(h, xxh3.Hash(h))
	sw.write(h)
}

// record writes one row; k includes the table prefix byte.
func (sw *snapWriter) record(k, v []byte) {
	rec := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(k)+len(v))
	rec = append(rec, k[0])
	rec = binary.AppendUvarint(rec, uint64(len(k)-1))
	rec = append(rec, k[1:]...)
	rec = binary.AppendUvarint(rec, uint64(len(v)))
	sw.write(append(rec, v...))
	sw.counts[bytes.IndexByte(snapTables[:], k[0])]++
}

// trailer writes the counts and the checksum, then flushes.
func (sw *snapWriter) trailer() error {
	t := []byte{snapEnd}
	for _, c := range sw.counts {
		t = binary.BigEndian.AppendUint64(t, c)
	}
	sw.write(t)
	sum := binary.BigEndian.AppendUint64(nil, sw.h.Sum64())
	sw.write(sum)
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	return sw.err
}

// snapReader reads the stream, hashing exactly the bytes consumed. tables
// is the prefix of snapTables the stream's version carries; it is set by
// header.
type snapReader struct {
	r      *bufio.Reader
	h      *xxh3.Hasher
	tables []byte
}

// newSnapReader wraps r.
func newSnapReader(r io.Reader) *snapReader {
	return &snapReader{r: bufio.NewReaderSize(r, 256<<10), h: xxh3.New()}
}

// corrupt wraps a read failure: a short stream is corruption, other reader
// errors pass through with context.
func corrupt(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: snapshot truncated in %s", ErrCorrupt, what)
	}
	return fmt.Errorf("store: read snapshot %s: %w", what, err)
}

// full reads exactly n bytes into a new slice.
func (sr *snapReader) full(n int, what string) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(sr.r, b); err != nil {
		return nil, corrupt(what, err)
	}
	_, _ = sr.h.Write(b)
	return b, nil
}

// ReadByte reads and hashes one byte; it lets binary.ReadUvarint use sr.
func (sr *snapReader) ReadByte() (byte, error) {
	c, err := sr.r.ReadByte()
	if err == nil {
		_, _ = sr.h.Write([]byte{c})
	}
	return c, err
}

// lenPrefixed reads a uvarint length (at most max) and that many bytes.
func (sr *snapReader) lenPrefixed(max int, what string) ([]byte, error) {
	n, err := binary.ReadUvarint(sr)
	if err != nil {
		return nil, corrupt(what, err)
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: snapshot %s of %d bytes (max %d)", ErrCorrupt, what, n, max)
	}
	return sr.full(int(n), what)
}

// header reads and checks the header.
func (sr *snapReader) header() (applied, error) {
	h, err := sr.full(snapHeaderLen, "header")
	if err != nil {
		return applied{}, err
	}
	body := h[:snapHeaderLen-8]
	switch {
	case !bytes.Equal(h[:8], snapMagic[:]):
		return applied{}, fmt.Errorf("%w: snapshot magic %q", ErrCorrupt, h[:8])
	case xxh3.Hash(body) != binary.BigEndian.Uint64(h[snapHeaderLen-8:]):
		return applied{}, fmt.Errorf("%w: snapshot header checksum", ErrCorrupt)
	}
	v := binary.BigEndian.Uint32(h[8:])
	n, ok := snapVersionTables[v]
	if !ok {
		return applied{}, fmt.Errorf("%w: snapshot version %d, want %d..%d", ErrUnsupported, v, snapVersionV1, snapVersion)
	}
	sr.tables = snapTables[:n]
	return applied{binary.BigEndian.Uint64(h[12:]), binary.BigEndian.Uint64(h[20:])}, nil
}

// trailer reads the counts and checksum after the end tag, checks them
// against what was read, and requires the stream to end there.
func (sr *snapReader) trailer(counts [len(snapTables)]uint64) error {
	t, err := sr.full(8*len(sr.tables), "trailer")
	if err != nil {
		return err
	}
	for i, c := range counts[:len(sr.tables)] {
		if got := binary.BigEndian.Uint64(t[8*i:]); got != c {
			return fmt.Errorf("%w: table %q has %d records, trailer says %d", ErrCorrupt, snapTables[i], c, got)
		}
	}
	want := sr.h.Sum64()
	sum, err := sr.full(8, "checksum")
	if err != nil {
		return err
	}
	if binary.BigEndian.Uint64(sum) != want {
		return fmt.Errorf("%w: snapshot checksum", ErrCorrupt)
	}
	if _, err := sr.r.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: bytes after snapshot trailer", ErrCorrupt)
	}
	return nil
}
