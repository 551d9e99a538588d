package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvrouter/kvrouter/routing"
)

// blockTokens is what the vLLM wire needs of a block that the kvrouter
// wire does not carry: its tokens and the adapter and salt it was hashed
// with.
type blockTokens struct {
	tokens     []uint32
	lora, salt string
	refs       int
}

// tokenBook maps the local hashes of the prompt blocks of requests in
// flight to their tokens, so that a stored event can carry token_ids as
// vLLM's do. A block is stored while a request that holds it is in
// flight, so the entries of requests in flight suffice. Guarded by the
// rank mutex.
type tokenBook struct {
	blockSize int
	m         map[routing.LocalHash]*blockTokens
}

// add records a request's complete blocks and returns their hashes, to be
// released when the request ends.
func (b *tokenBook) add(tokens []uint32, seed uint64, lora, salt string) []routing.LocalHash {
	locals, _ := routing.LocalHashes(nil, tokens, b.blockSize, seed)
	for i, l := range locals {
		e := b.m[l]
		if e == nil {
			e = &blockTokens{tokens: tokens[i*b.blockSize : (i+1)*b.blockSize], lora: lora, salt: salt}
			b.m[l] = e
		}
		e.refs++
	}
	return locals
}

func (b *tokenBook) release(locals []routing.LocalHash) {
	for _, l := range locals {
		if e := b.m[l]; e != nil {
			if e.refs--; e.refs <= 0 {
				delete(b.m, l)
			}
		}
	}
}

// opaqueHash turns the mocker's engine id of a block into what a vLLM
// engine with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 sends: 32 bytes of a
// SHA-256 digest, here of the incarnation and the id, so that the router
// can rely on nothing but their identity.
func opaqueHash(incarnation uint64, h routing.EngineHash) []byte {
	var in [16]byte
	binary.LittleEndian.PutUint64(in[:8], incarnation)
	binary.LittleEndian.PutUint64(in[8:], uint64(h))
	sum := sha256.Sum256(in[:])
	return sum[:]
}

// msgpackWriter writes msgpack values and keeps the first error, so that
// an encoding reads as the layout it writes.
type msgpackWriter struct {
	enc *msgpack.Encoder
	err error
}

func (w *msgpackWriter) do(f func() error) {
	if w.err == nil {
		w.err = f()
	}
}

func (w *msgpackWriter) array(n int)     { w.do(func() error { return w.enc.EncodeArrayLen(n) }) }
func (w *msgpackWriter) str(s string)    { w.do(func() error { return w.enc.EncodeString(s) }) }
func (w *msgpackWriter) bin(b []byte)    { w.do(func() error { return w.enc.EncodeBytes(b) }) }
func (w *msgpackWriter) uint(v uint64)   { w.do(func() error { return w.enc.EncodeUint(v) }) }
func (w *msgpackWriter) float(v float64) { w.do(func() error { return w.enc.EncodeFloat64(v) }) }
func (w *msgpackWriter) null()           { w.do(w.enc.EncodeNil) }

// optStr writes s, or nil when it is empty.
func (w *msgpackWriter) optStr(s string) {
	if s == "" {
		w.null()
		return
	}
	w.str(s)
}

// vllmEncoder writes KVEventBatch payloads in the array layout of vLLM
// 0.12 to 0.2x (msgspec array_like, omit_defaults): the batch as [ts,
// events, data_parallel_rank], BlockStored as [tag, block_hashes,
// parent_block_hash, token_ids, block_size, lora_id, medium, lora_name]
// plus extra_keys when a block has a cache salt, BlockRemoved as [tag,
// block_hashes, medium], AllBlocksCleared as [tag].
type vllmEncoder struct {
	buf         bytes.Buffer
	w           msgpackWriter
	incarnation uint64
	blockSize   int
	rank        uint32
}

func newVLLMEncoder(incarnation uint64, blockSize int, rank uint32) *vllmEncoder {
	e := &vllmEncoder{incarnation: incarnation, blockSize: blockSize, rank: rank}
	e.w.enc = msgpack.NewEncoder(&e.buf)
	return e
}

// batch encodes events. A stored event with a block missing from the book
// is an internal error: it is left out and reported, the rest is encoded.
func (e *vllmEncoder) batch(ts float64, events []routing.Event, book *tokenBook) ([]byte, error) {
	var missing error
	keep := make([]*routing.Event, 0, len(events))
	for i := range events {
		if err := checkBook(&events[i], book); err != nil {
			missing = err
			continue
		}
		keep = append(keep, &events[i])
	}
	e.buf.Reset()
	e.w.err = nil
	e.w.array(3)
	e.w.float(ts)
	e.w.array(len(keep))
	for _, ev := range keep {
		e.event(ev, book)
	}
	e.w.uint(uint64(e.rank))
	if e.w.err != nil {
		return nil, e.w.err
	}
	return bytes.Clone(e.buf.Bytes()), missing
}

// checkBook reports a stored block whose tokens the book does not have.
func checkBook(ev *routing.Event, book *tokenBook) error {
	for _, b := range ev.Blocks {
		if book.m[b.Local] == nil {
			return fmt.Errorf("mocker server: no tokens for stored block %#x", uint64(b.Local))
		}
	}
	return nil
}

func (e *vllmEncoder) event(ev *routing.Event, book *tokenBook) {
	switch ev.Kind {
	case routing.EventStored:
		e.stored(ev, book)
	case routing.EventRemoved:
		e.w.array(3)
		e.w.str("BlockRemoved")
		e.hashes(ev.Removed)
		e.w.str("GPU")
	default:
		e.w.array(1)
		e.w.str("AllBlocksCleared")
	}
}

// stored writes one BlockStored. All blocks of a mocker event come from
// one request and share its adapter and salt; a salt goes in every
// block's extra_keys.
func (e *vllmEncoder) stored(ev *routing.Event, book *tokenBook) {
	first := book.m[ev.Blocks[0].Local]
	if first.salt == "" {
		e.w.array(8)
	} else {
		e.w.array(9)
	}
	e.w.str("BlockStored")
	e.w.array(len(ev.Blocks))
	for _, b := range ev.Blocks {
		e.w.bin(opaqueHash(e.incarnation, b.Engine))
	}
	if ev.HasParent {
		e.w.bin(opaqueHash(e.incarnation, ev.Parent))
	} else {
		e.w.null()
	}
	e.w.array(len(ev.Blocks) * e.blockSize)
	for _, b := range ev.Blocks {
		for _, t := range book.m[b.Local].tokens {
			e.w.uint(uint64(t))
		}
	}
	e.w.uint(uint64(e.blockSize))
	e.w.null() // lora_id, deprecated
	e.w.str("GPU")
	e.w.optStr(first.lora)
	if first.salt != "" {
		e.w.array(len(ev.Blocks))
		for range ev.Blocks {
			e.w.array(1)
			e.w.str(first.salt)
		}
	}
}

func (e *vllmEncoder) hashes(hs []routing.EngineHash) {
	e.w.array(len(hs))
	for _, h := range hs {
		e.w.bin(opaqueHash(e.incarnation, h))
	}
}

// rankEndpoint offsets a tcp://host:port endpoint's port by rank, as vLLM
// does for data-parallel ranks; port 0 stays 0 (any free port).
func rankEndpoint(ep string, rank uint32) (string, int, error) {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return "", 0, fmt.Errorf("%q is not tcp://host:port", ep)
	}
	host, p, err := net.SplitHostPort(rest)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", ep, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port+int(rank) > 65535 {
		return "", 0, fmt.Errorf("%q: bad port", ep)
	}
	if port != 0 {
		port += int(rank)
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port)), port, nil
}
