package vllmevents

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/kvrouter/kvrouter/routing"
)

// Event class names: msgspec's tag of each class is its name, first in a
// tagged array and under "type" in a tagged map.
const (
	tagStored  = "BlockStored"
	tagRemoved = "BlockRemoved"
	tagCleared = "AllBlocksCleared"
	tagField   = "type"
)

// maxBlockSize bounds a block size in tokens; engines use 1 to a few
// hundred, and a larger value is corrupt input.
const maxBlockSize = 1 << 20

// Field positions of the array layouts, after the tag. Every version only
// appended fields, so one list per class covers them all; the fourth field
// of BlockStored was num_toks_per_block before it was block_size.
var (
	storedFields = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size",
		"lora_id", "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind"}
	removedFields = []string{"block_hashes", "medium", "group_idx"}
)

// kindOf maps a tag to the event kind, or 0 for an unknown tag.
func kindOf(tag string) routing.EventKind {
	switch tag {
	case tagStored:
		return routing.EventStored
	case tagRemoved:
		return routing.EventRemoved
	case tagCleared:
		return routing.EventCleared
	}
	return 0
}

// batch decodes the outer KVEventBatch, an array [ts, events, dp_rank?]
// or a map of the same names.
func (x *Decoder) batch(b *Batch) error {
	c, err := x.peek()
	if err != nil {
		return err
	}
	if isMap(c) {
		return x.batchMap(b)
	}
	n, err := x.length(false)
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if n < 2 {
		return fmt.Errorf("batch of %d fields", n)
	}
	if b.TS, err = x.float(); err != nil {
		return err
	}
	if err := x.events(b); err != nil {
		return err
	}
	if n > 2 {
		if b.Rank, b.HasRank, err = x.optInt(); err != nil {
			return err
		}
	}
	for range n - 3 {
		if err := x.skip(1); err != nil {
			return err
		}
	}
	return nil
}

func (x *Decoder) batchMap(b *Batch) error {
	n, err := x.length(true)
	if err != nil {
		return err
	}
	seen := false
	for range n {
		k, err := x.key()
		if err != nil {
			return err
		}
		switch k {
		case "ts":
			b.TS, err = x.float()
		case "events":
			err, seen = x.events(b), true
		case "data_parallel_rank":
			b.Rank, b.HasRank, err = x.optInt()
		default:
			err = x.skip(1)
		}
		if err != nil {
			return err
		}
	}
	if !seen {
		return fmt.Errorf("batch map without events")
	}
	return nil
}

// events decodes the event list. An event with an unknown tag is skipped
// and listed in b.Rejects; anything else that does not decode fails the
// batch.
func (x *Decoder) events(b *Batch) error {
	n, err := x.length(false)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := range n {
		var ev Event
		tag, err := x.event(&ev)
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if ev.Kind == 0 {
			b.Rejects = append(b.Rejects, Reject{Reason: ReasonUnknownEvent,
				Err: fmt.Errorf("%w: event %d: unknown tag %.64q", ErrRefused, i, tag)})
			continue
		}
		b.Events = append(b.Events, ev)
	}
	return nil
}

// event decodes one tagged event, array or map, and returns its tag.
func (x *Decoder) event(ev *Event) (string, error) {
	c, err := x.peek()
	if err != nil {
		return "", err
	}
	if isMap(c) {
		return x.eventMap(ev)
	}
	n, err := x.length(false)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", fmt.Errorf("event without a tag")
	}
	tag, ok, err := x.optString()
	if err != nil || !ok {
		return "", fmt.Errorf("event tag is not a string: %v", err)
	}
	ev.Kind = kindOf(tag)
	names := fieldsOf(ev.Kind)
	for i := range n - 1 {
		name := ""
		if i < len(names) {
			name = names[i]
		}
		if err := x.field(ev, name); err != nil {
			return tag, err
		}
	}
	return tag, x.check(ev)
}

func fieldsOf(k routing.EventKind) []string {
	switch k {
	case routing.EventStored:
		return storedFields
	case routing.EventRemoved:
		return removedFields
	}
	return nil
}

// eventMap decodes a map-encoded event; its tag is under "type", and the
// fields are read by name whatever the tag, since no two classes give one
// name different meanings.
func (x *Decoder) eventMap(ev *Event) (string, error) {
	n, err := x.length(true)
	if err != nil {
		return "", err
	}
	tag := ""
	for range n {
		k, err := x.key()
		if err != nil {
			return "", err
		}
		if k == tagField {
			if tag, _, err = x.optString(); err != nil {
				return "", err
			}
			continue
		}
		if k == "num_toks_per_block" {
			k = "block_size"
		}
		if err := x.field(ev, k); err != nil {
			return "", err
		}
	}
	ev.Kind = kindOf(tag)
	if ev.Kind == 0 {
		return tag, nil
	}
	return tag, x.check(ev)
}

// check enforces what each kind needs: stored events their hashes, tokens
// and block size, removed events their hashes.
func (x *Decoder) check(ev *Event) error {
	switch ev.Kind {
	case routing.EventStored:
		if ev.Hashes == nil {
			return fmt.Errorf("BlockStored without block_hashes")
		}
	case routing.EventRemoved:
		if ev.Hashes == nil {
			return fmt.Errorf("BlockRemoved without block_hashes")
		}
	}
	return nil
}

// field decodes the value of one named field into ev; unknown names are
// skipped, so fields that newer versions add pass through.
func (x *Decoder) field(ev *Event, name string) error {
	var err error
	switch name {
	case "block_hashes":
		ev.Hashes, err = x.hashList()
		if ev.Hashes == nil && err == nil {
			ev.Hashes = []routing.EngineHash{}
		}
	case "parent_block_hash":
		err = x.parent(ev)
	case "token_ids":
		ev.Tokens, err = x.tokenList()
		if ev.Tokens == nil && err == nil {
			ev.Tokens = []uint32{}
		}
	case "block_size":
		ev.BlockSize, err = x.blockSize()
	case "lora_id":
		ev.LoRAID, _, err = x.optInt()
	case "medium":
		ev.Medium, _, err = x.optString()
	case "lora_name":
		ev.LoRAName, _, err = x.optString()
	case "extra_keys":
		ev.Extra, err = x.extraKeys()
	case "group_idx":
		ev.Group, ev.HasGroup, err = x.optInt()
	case "kv_cache_spec_kind":
		ev.SpecKind, _, err = x.optString()
	default:
		err = x.skip(1)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (x *Decoder) parent(ev *Event) error {
	c, err := x.peek()
	if err != nil {
		return err
	}
	if c == msgpcode.Nil { // nil: the first block of a sequence
		return x.d.Skip()
	}
	ev.Parent, err = x.hash()
	ev.HasParent = err == nil
	return err
}

// blockSize reads block_size, or num_toks_per_block (one count per block),
// which yields its common value or -1 when the counts differ. A null or 0
// size (vLLM's CPU-offload events once sent block_size 0) reads as 0: the
// converter then takes the declared size if the tokens fit it.
func (x *Decoder) blockSize() (int, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Nil {
		return 0, x.d.Skip()
	}
	if !isArray(c) {
		return x.size()
	}
	n, err := x.length(false)
	if err != nil {
		return 0, err
	}
	size := 0
	for i := range n {
		v, err := x.size()
		if err != nil {
			return 0, fmt.Errorf("num_toks_per_block[%d]: %w", i, err)
		}
		if i > 0 && v != size {
			size = -1
		} else if size != -1 {
			size = v
		}
	}
	return size, nil
}

// size reads one block size: an int in 0..maxBlockSize.
func (x *Decoder) size() (int, error) {
	v, neg, err := x.int()
	if err != nil || neg || v > maxBlockSize {
		return 0, fmt.Errorf("block size %d: %v", int64(v), err)
	}
	return int(v), nil
}

// extraKeys reads extra_keys: nil, or one entry per block, each nil or
// opaque (kept as raw msgpack).
func (x *Decoder) extraKeys() ([][]byte, error) {
	c, err := x.peek()
	if err != nil {
		return nil, err
	}
	if !isArray(c) {
		return nil, x.skip(1)
	}
	n, err := x.length(false)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, n)
	for i := range n {
		if c, err = x.peek(); err != nil {
			return nil, err
		}
		if c == msgpcode.Nil {
			err = x.d.Skip()
		} else {
			out[i], err = x.raw()
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
