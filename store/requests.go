package store

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// MaxRequestIDBytes bounds a remembered request id; ids are client tokens
// and the bound keeps the lookup table's keys small.
const MaxRequestIDBytes = 256

// MaxRequestResultBytes bounds a remembered result. Results are small
// encoded replies; the bound keeps the FIFO's footprint predictable and
// every record below the snapshot reader's value limit.
const MaxRequestResultBytes = 16 << 10

// requestCodecVersion is the first byte of an encoded request value.
const requestCodecVersion byte = 1

// Request is one remembered request: its FIFO sequence number, the client's
// request id and the encoded result the FSM returned for it.
type Request struct {
	Seq    uint64
	ID     string
	Result []byte
}

// PutRequest remembers the result of request id under FIFO position seq.
// The caller assigns seq, increasing with every request, and remembers an
// id at most once (it looks the id up first); the lookup key then names the
// newest row. An empty or oversized id or an oversized result is refused.
func (b *Batch) PutRequest(seq uint64, id string, result []byte) {
	r := Request{Seq: seq, ID: id, Result: result}
	b.record(r.validate())
	b.set(requestSeqKey(seq), encodeRequest(&r))
	b.set(requestIDKey(id), binary.BigEndian.AppendUint64(nil, seq))
}

// DeleteRequest forgets the request remembered at seq under id; evicting
// the oldest request is DeleteRequest of the first row ScanRequests yields.
func (b *Batch) DeleteRequest(seq uint64, id string) {
	b.del(requestSeqKey(seq))
	b.del(requestIDKey(id))
}

// Request returns the remembered request with the given id, or ErrNotFound.
// Both keys are read under one lock, so a concurrent restore cannot pair
// the lookup of one state with the row of another.
func (s *FSMStore) Request(id string) (Request, error) {
	var r Request
	err := s.withGen(func(g *generation) error {
		v, err := getValue(g.db, requestIDKey(id))
		if err != nil {
			return err
		}
		if len(v) != 8 {
			return fmt.Errorf("%w: request lookup %q value", ErrCorrupt, id)
		}
		k := requestSeqKey(binary.BigEndian.Uint64(v))
		if v, err = getValue(g.db, k); err != nil {
			return fmt.Errorf("%w: request %q lookup names a missing row: %v", ErrCorrupt, id, err)
		}
		if r, err = decodeRequest(k, v); err == nil && r.ID != id {
			err = fmt.Errorf("%w: request lookup %q names row of %q", ErrCorrupt, id, r.ID)
		}
		return err
	})
	return r, err
}

// ScanRequests calls fn for every remembered request, oldest first.
func (s *FSMStore) ScanRequests(fn func(Request) error) error {
	return scanPrefix(s, tableRequestSeq, decodeRequest, fn)
}

// OldestRequest returns the first request in FIFO order, or ErrNotFound
// when none is remembered; it is the eviction candidate.
func (s *FSMStore) OldestRequest() (Request, error) {
	return s.edgeRequest((*pebble.Iterator).First)
}

// NewestRequest returns the last request in FIFO order, or ErrNotFound;
// its Seq is where a restarted node continues numbering.
func (s *FSMStore) NewestRequest() (Request, error) {
	return s.edgeRequest((*pebble.Iterator).Last)
}

// edgeRequest positions a bounded iterator with seek and decodes that row.
func (s *FSMStore) edgeRequest(seek func(*pebble.Iterator) bool) (Request, error) {
	var r Request
	err := s.withGen(func(g *generation) error {
		lo, hi := prefixBounds(tableRequestSeq)
		it, err := g.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("store: iterator: %w", err)
		}
		defer func() { _ = it.Close() }()
		if !seek(it) {
			if err := it.Error(); err != nil {
				return fmt.Errorf("store: request scan: %w", err)
			}
			return fmt.Errorf("%w: no remembered request", ErrNotFound)
		}
		v, err := it.ValueAndErr()
		if err == nil {
			r, err = decodeRequest(it.Key(), v)
		}
		return err
	})
	return r, err
}

// validate checks the id and result against their bounds.
func (r *Request) validate() error {
	switch {
	case r.ID == "" || len(r.ID) > MaxRequestIDBytes:
		return fmt.Errorf("%w: request id of %d bytes (want 1..%d)", ErrInvalidArgument, len(r.ID), MaxRequestIDBytes)
	case len(r.Result) > MaxRequestResultBytes:
		return fmt.Errorf("%w: request result of %d bytes (max %d)", ErrInvalidArgument, len(r.Result), MaxRequestResultBytes)
	}
	return nil
}

// encodeRequest encodes version ‖ uvarint len(id) ‖ id ‖ uvarint
// len(result) ‖ result; Seq lives in the table key.
func encodeRequest(r *Request) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(r.ID)+len(r.Result))
	b = append(b, requestCodecVersion)
	b = binary.AppendUvarint(b, uint64(len(r.ID)))
	b = append(b, r.ID...)
	b = binary.AppendUvarint(b, uint64(len(r.Result)))
	return append(b, r.Result...)
}

// decodeRequest decodes a request row, copying the result.
func decodeRequest(k, v []byte) (Request, error) {
	if len(k) != reqSeqKeyLen || k[0] != tableRequestSeq || len(v) == 0 || v[0] != requestCodecVersion {
		return Request{}, fmt.Errorf("%w: request row %x", ErrCorrupt, k)
	}
	id, rest, err := takeBytes(v[1:])
	if err != nil {
		return Request{}, err
	}
	result, rest, err := takeBytes(rest)
	if err != nil || len(rest) != 0 {
		return Request{}, fmt.Errorf("%w: request row %x fields", ErrCorrupt, k)
	}
	r := Request{Seq: binary.BigEndian.Uint64(k[1:]), ID: string(id), Result: append([]byte{}, result...)}
	if err := r.validate(); err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return r, nil
}
