package vllmevents

import (
	"bytes"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/kvrouter/kvrouter/routing"
)

// maxDepth bounds the nesting of skipped values. The library's Skip
// recurses once per level, so a payload of nested arrays could otherwise
// exhaust the stack; no field of a real batch nests more than a few levels.
const maxDepth = 32

// Decoder decodes KVEventBatch payloads. It reuses its buffers between
// calls and is not safe for concurrent use.
type Decoder struct {
	r   bytes.Reader
	d   *msgpack.Decoder
	buf []byte // the payload being decoded

	hashes  []routing.EngineHash
	tokens  []uint32
	scratch [64]byte
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	x := &Decoder{}
	x.d = msgpack.NewDecoder(&x.r)
	return x
}

// Decode decodes payload into b, replacing its contents. It returns an
// error wrapping ErrMalformed when the payload is not a KVEventBatch of
// any known layout; events with unknown tags are only listed in
// b.Rejects. It never panics.
func (x *Decoder) Decode(payload []byte, b *Batch) error {
	x.buf = payload
	x.r.Reset(payload)
	x.d.Reset(&x.r)
	x.hashes, x.tokens = x.hashes[:0], x.tokens[:0]
	*b = Batch{Events: b.Events[:0], Rejects: b.Rejects[:0]}
	err := x.batch(b)
	if err == nil && x.r.Len() != 0 {
		err = fmt.Errorf("%d trailing bytes", x.r.Len())
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// DecodeBatch decodes one payload with a fresh Decoder.
func DecodeBatch(payload []byte) (Batch, error) {
	var b Batch
	err := NewDecoder().Decode(payload, &b)
	return b, err
}

func (x *Decoder) peek() (byte, error) { return x.d.PeekCode() }

// length reads an array or map header and checks it against the bytes
// left, so that a forged length cannot make the decoder allocate more
// than the payload could fill (every element takes at least one byte).
func (x *Decoder) length(isMap bool) (int, error) {
	var n int
	var err error
	if isMap {
		n, err = x.d.DecodeMapLen()
	} else {
		n, err = x.d.DecodeArrayLen()
	}
	switch {
	case err != nil:
		return 0, err
	case n < 0:
		return 0, fmt.Errorf("null where a container was expected")
	case n > x.r.Len():
		return 0, fmt.Errorf("container of %d elements in %d bytes", n, x.r.Len())
	}
	return n, nil
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
}

func isFloat(c byte) bool { return c == msgpcode.Float || c == msgpcode.Double }

func isStr(c byte) bool { return msgpcode.IsString(c) || msgpcode.IsBin(c) }

// skip skips one value, refusing nesting deeper than maxDepth.
func (x *Decoder) skip(depth int) error {
	c, err := x.peek()
	if err != nil {
		return err
	}
	if !isArray(c) && !isMap(c) {
		return x.d.Skip()
	}
	if depth >= maxDepth {
		return fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	n, err := x.length(isMap(c))
	if err != nil {
		return err
	}
	if isMap(c) {
		n *= 2
	}
	for range n {
		if err := x.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// raw skips one value and returns its msgpack bytes (a view of the
// payload).
func (x *Decoder) raw() ([]byte, error) {
	start := len(x.buf) - x.r.Len()
	if err := x.skip(1); err != nil {
		return nil, err
	}
	return x.buf[start : len(x.buf)-x.r.Len()], nil
}

// key reads a map key as a string; keys of other types read as "".
func (x *Decoder) key() (string, error) {
	c, err := x.peek()
	if err != nil {
		return "", err
	}
	if !isStr(c) {
		return "", x.skip(1)
	}
	return x.d.DecodeString()
}

// optInt reads an int, or reports false for nil or any other type (which
// it skips): optional fields of an unexpected type are ignored.
func (x *Decoder) optInt() (int64, bool, error) {
	c, err := x.peek()
	if err != nil {
		return 0, false, err
	}
	if !isInt(c) {
		return 0, false, x.skip(1)
	}
	v, err := x.d.DecodeInt64()
	return v, err == nil, err
}

// optString reads a str or bin, or reports false for nil or any other type.
func (x *Decoder) optString() (string, bool, error) {
	c, err := x.peek()
	if err != nil {
		return "", false, err
	}
	if !isStr(c) {
		return "", false, x.skip(1)
	}
	s, err := x.d.DecodeString()
	return s, err == nil, err
}

// float reads the batch timestamp, which is a float but may be an int.
func (x *Decoder) float() (float64, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	if !isFloat(c) && !isInt(c) {
		return 0, fmt.Errorf("timestamp of type %#x", c)
	}
	return x.d.DecodeFloat64()
}

// hash reads one engine block hash: an int as its 64-bit two's-complement
// value, bytes (or a string) as XXH3-64 of the bytes.
func (x *Decoder) hash() (routing.EngineHash, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	if isInt(c) {
		v, _, err := x.int()
		return routing.EngineHash(v), err
	}
	if !isStr(c) {
		return 0, fmt.Errorf("block hash of type %#x", c)
	}
	n, err := x.d.DecodeBytesLen()
	if err != nil || n < 0 || n > x.r.Len() {
		return 0, fmt.Errorf("block hash bytes: length %d: %v", n, err)
	}
	b := x.scratch[:0]
	if n > len(x.scratch) {
		b = make([]byte, n)
	}
	b = b[:n]
	if err := x.d.ReadFull(b); err != nil {
		return 0, err
	}
	return BytesHash(b), nil
}

// hashList reads an array of hashes into the decoder's hash buffer.
func (x *Decoder) hashList() ([]routing.EngineHash, error) {
	n, err := x.length(false)
	if err != nil {
		return nil, fmt.Errorf("block_hashes: %w", err)
	}
	start := len(x.hashes)
	for range n {
		h, err := x.hash()
		if err != nil {
			return nil, err
		}
		x.hashes = append(x.hashes, h)
	}
	return x.hashes[start:len(x.hashes):len(x.hashes)], nil
}

// tokenList reads token ids, each a u32.
func (x *Decoder) tokenList() ([]uint32, error) {
	n, err := x.length(false)
	if err != nil {
		return nil, fmt.Errorf("token_ids: %w", err)
	}
	start := len(x.tokens)
	b, off := x.rest(), 0
	for range n {
		v, neg, w, err := parseInt(b[off:])
		if err != nil {
			return nil, fmt.Errorf("token_ids: %w", err)
		}
		if neg || v > math.MaxUint32 {
			return nil, fmt.Errorf("token id %d out of range", int64(v))
		}
		x.tokens = append(x.tokens, uint32(v))
		off += w
	}
	x.skipBytes(off)
	return x.tokens[start:len(x.tokens):len(x.tokens)], nil
}

// int reads one msgpack integer and returns its 64-bit two's-complement
// value and whether it is negative. Unlike the library it refuses nil.
func (x *Decoder) int() (uint64, bool, error) {
	v, neg, w, err := parseInt(x.rest())
	if err != nil {
		return 0, false, err
	}
	x.skipBytes(w)
	return v, neg, nil
}

// rest is the payload not read yet; the library's decoder reads straight
// from x.r without buffering, so the two views agree.
func (x *Decoder) rest() []byte { return x.buf[len(x.buf)-x.r.Len():] }

func (x *Decoder) skipBytes(n int) { _, _ = x.r.Seek(int64(n), io.SeekCurrent) }

// parseInt decodes the msgpack integer at the start of b and returns its
// value, sign and width in bytes. Token ids dominate a payload, so they
// are parsed from the bytes directly rather than through the library's
// generic dispatch.
func parseInt(b []byte) (uint64, bool, int, error) {
	if len(b) == 0 {
		return 0, false, 0, io.ErrUnexpectedEOF
	}
	c := b[0]
	switch {
	case c <= msgpcode.PosFixedNumHigh:
		return uint64(c), false, 1, nil
	case c >= msgpcode.NegFixedNumLow:
		return uint64(int64(int8(c))), true, 1, nil
	}
	size, signed := intWidth(c)
	if size == 0 {
		return 0, false, 0, fmt.Errorf("integer expected, found type %#x", c)
	}
	if len(b) < 1+size {
		return 0, false, 0, io.ErrUnexpectedEOF
	}
	var v uint64
	for _, d := range b[1 : 1+size] {
		v = v<<8 | uint64(d)
	}
	if signed && b[1]&0x80 != 0 {
		// Sign-extend the narrower widths to 64 bits.
		return v | ^uint64(0)<<(8*uint(size)), true, 1 + size, nil
	}
	return v, false, 1 + size, nil
}

// intWidth gives the byte width and signedness of an integer code, or 0
// for a code that is not a sized integer.
func intWidth(c byte) (int, bool) {
	switch c {
	case msgpcode.Uint8:
		return 1, false
	case msgpcode.Uint16:
		return 2, false
	case msgpcode.Uint32:
		return 4, false
	case msgpcode.Uint64:
		return 8, false
	case msgpcode.Int8:
		return 1, true
	case msgpcode.Int16:
		return 2, true
	case msgpcode.Int32:
		return 4, true
	case msgpcode.Int64:
		return 8, true
	}
	return 0, false
}
