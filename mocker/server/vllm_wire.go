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

func newTokenBook(blockSize int) *tokenBook {
	return &tokenBook{blockSize: blockSize, m: make(map[routing.LocalHash]*blockTokens)}
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

// vllmEncoder writes KVEventBatch payloads in the array layout of vLLM
// 0.10 to 0.2x (msgspec array_like, omit_defaults): the batch as [ts,
// events, data_parallel_rank], BlockStored as [tag, block_hashes,
// parent_block_hash, token_ids, block_size, lora_id, medium, lora_name]
// plus extra_keys when a block has a cache salt, BlockRemoved as [tag,
// block_hashes, medium].
type vllmEncoder struct {
	buf         bytes.Buffer
	enc         *msgpack.Encoder
	incarnation uint64
	blockSize   int
	rank        uint32
}

func newVLLMEncoder(incarnation uint64, blockSize int, rank uint32) *vllmEncoder {
	e := &vllmEncoder{incarnation: incarnation, blockSize: blockSize, rank: rank}
	e.enc = msgpack.NewEncoder(&e.buf)
	return e
}

// batch encodes events; a stored block missing from the book is an
// internal error (the event is left out and reported).
func (e *vllmEncoder) batch(ts float64, events []routing.Event, book *tokenBook) ([]byte, error) {
	e.buf.Reset()
	var firstErr error
	out := make([]func() error, 0, len(events))
	for i := range events {
		ev := &events[i]
		if ev.Kind == routing.EventStored {
			if err := e.checkBook(ev, book); err != nil {
				firstErr = err
				continue
			}
		}
		out = append(out, func() error { return e.event(ev, book) })
	}
	err := e.enc.EncodeArrayLen(3)
	if err == nil {
		err = e.enc.EncodeFloat64(ts)
	}
	if err == nil {
		err = e.enc.EncodeArrayLen(len(out))
	}
	for _, f := range out {
		if err == nil {
			err = f()
		}
	}
	if err == nil {
		err = e.enc.EncodeUint(uint64(e.rank))
	}
	if err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), firstErr
}

func (e *vllmEncoder) checkBook(ev *routing.Event, book *tokenBook) error {
	for _, b := range ev.Blocks {
		if book.m[b.Local] == nil {
			return fmt.Errorf("mocker server: no tokens for stored block %#x", uint64(b.Local))
		}
	}
	return nil
}

func (e *vllmEncoder) event(ev *routing.Event, book *tokenBook) error {
	switch ev.Kind {
	case routing.EventStored:
		return e.stored(ev, book)
	case routing.EventRemoved:
		return e.encodeAll(e.enc.EncodeArrayLen(3), func() error { return e.enc.EncodeString("BlockRemoved") },
			func() error { return e.hashes(ev.Removed) }, func() error { return e.enc.EncodeString("GPU") })
	}
	return e.encodeAll(e.enc.EncodeArrayLen(1), func() error { return e.enc.EncodeString("AllBlocksCleared") })
}

// stored writes one BlockStored. All blocks of a mocker event share the
// request's adapter and salt; a salt goes in every block's extra_keys.
func (e *vllmEncoder) stored(ev *routing.Event, book *tokenBook) error {
	first := book.m[ev.Blocks[0].Local]
	n := 8
	if first.salt != "" {
		n = 9
	}
	hashes := make([]routing.EngineHash, len(ev.Blocks))
	for i, b := range ev.Blocks {
		hashes[i] = b.Engine
	}
	steps := []func() error{
		func() error { return e.enc.EncodeString("BlockStored") },
		func() error { return e.hashes(hashes) },
		func() error {
			if !ev.HasParent {
				return e.enc.EncodeNil()
			}
			return e.enc.EncodeBytes(opaqueHash(e.incarnation, ev.Parent))
		},
		func() error { return e.tokens(ev.Blocks, book) },
		func() error { return e.enc.EncodeInt(int64(e.blockSize)) },
		func() error { return e.enc.EncodeNil() },
		func() error { return e.enc.EncodeString("GPU") },
		func() error { return e.optString(first.lora) },
	}
	if n == 9 {
		steps = append(steps, func() error { return e.salts(len(ev.Blocks), first.salt) })
	}
	return e.encodeAll(e.enc.EncodeArrayLen(n), steps...)
}

func (e *vllmEncoder) hashes(hs []routing.EngineHash) error {
	err := e.enc.EncodeArrayLen(len(hs))
	for _, h := range hs {
		if err == nil {
			err = e.enc.EncodeBytes(opaqueHash(e.incarnation, h))
		}
	}
	return err
}

func (e *vllmEncoder) tokens(blocks []routing.StoredBlock, book *tokenBook) error {
	err := e.enc.EncodeArrayLen(len(blocks) * e.blockSize)
	for _, b := range blocks {
		for _, t := range book.m[b.Local].tokens {
			if err == nil {
				err = e.enc.EncodeUint(uint64(t))
			}
		}
	}
	return err
}

func (e *vllmEncoder) salts(n int, salt string) error {
	err := e.enc.EncodeArrayLen(n)
	for range n {
		if err == nil {
			err = e.encodeAll(e.enc.EncodeArrayLen(1), func() error { return e.enc.EncodeString(salt) })
		}
	}
	return err
}

func (e *vllmEncoder) optString(s string) error {
	if s == "" {
		return e.enc.EncodeNil()
	}
	return e.enc.EncodeString(s)
}

// encodeAll runs steps in order after a header write, stopping at the
// first error.
func (e *vllmEncoder) encodeAll(err error, steps ...func() error) error {
	for _, f := range steps {
		if err != nil {
			return err
		}
		err = f()
	}
	return err
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
