package vllmevents

import (
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvrouter/kvrouter/routing"
)

// Converter turns decoded engine events of one worker into routing events
// (without ids): it checks them against the declared block size, hashes
// the stored blocks' tokens and maps media to tiers. It remembers which KV
// cache groups of a hybrid model to skip. Not safe for concurrent use.
type Converter struct {
	worker    routing.Worker
	blockSize int
	// skipGroups are the group_idx values whose stored events named a
	// kind that cannot serve a prefix; their removals are skipped too.
	skipGroups map[int64]bool
}

// NewConverter returns a Converter for worker w with the declared block
// size in tokens.
func NewConverter(w routing.Worker, blockSize int) (*Converter, error) {
	if blockSize <= 0 {
		return nil, fmt.Errorf("%w: block size %d", ErrConfig, blockSize)
	}
	return &Converter{worker: w, blockSize: blockSize, skipGroups: map[int64]bool{}}, nil
}

// Skip reasons of kvrouter_vllmevents_skipped_events_total: events that
// are valid but cannot be indexed.
const (
	// SkipGroup: a KV cache group that cannot serve a prefix.
	SkipGroup = "group"
	// SkipNoTokens: a stored event without token ids (vLLM's CPU-offload
	// placeholders), whose blocks the router cannot hash.
	SkipNoTokens = "no_tokens"
)

// Convert appends to dst the routing events of b's events, in order, and
// returns the refused ones (ErrRefused with a reason) and the reasons of
// the skipped ones. The block slices of the appended events are freshly
// allocated: the caller may keep them.
func (c *Converter) Convert(dst []routing.Event, b *Batch) ([]routing.Event, []Reject, []string) {
	var rejects []Reject
	var skipped []string
	arena := c.arena(b)
	for i := range b.Events {
		ev := &b.Events[i]
		if c.skip(ev) {
			skipped = append(skipped, SkipGroup)
			continue
		}
		if ev.Kind == routing.EventStored && len(ev.Tokens) == 0 {
			skipped = append(skipped, SkipNoTokens)
			continue
		}
		out, rest, rej := c.convert(ev, arena)
		if rej != nil {
			rejects = append(rejects, *rej)
			continue
		}
		arena = rest
		dst = append(dst, out)
	}
	return dst, rejects, skipped
}

// arena allocates one slice for all the stored blocks of a batch.
func (c *Converter) arena(b *Batch) []routing.StoredBlock {
	n := 0
	for i := range b.Events {
		if b.Events[i].Kind == routing.EventStored {
			n += len(b.Events[i].Hashes)
		}
	}
	return make([]routing.StoredBlock, 0, n)
}

// skip reports whether ev belongs to a KV cache group the router does not
// index, learning groups from the spec kind of stored events.
func (c *Converter) skip(ev *Event) bool {
	if !ev.HasGroup {
		return false
	}
	if ev.Kind == routing.EventStored && ev.SpecKind != "" {
		c.skipGroups[ev.Group] = !prefixKind(ev.SpecKind)
	}
	return c.skipGroups[ev.Group]
}

// prefixKind reports whether blocks of a KV cache spec kind hold a whole
// prefix (full or MLA attention), so that a request can reuse them.
func prefixKind(kind string) bool {
	k := strings.ToLower(kind)
	return strings.Contains(k, "full") || strings.Contains(k, "mla")
}

// convert builds one routing event, taking its stored blocks from arena.
func (c *Converter) convert(ev *Event, arena []routing.StoredBlock) (routing.Event, []routing.StoredBlock, *Reject) {
	out := routing.Event{Worker: c.worker, Kind: ev.Kind}
	tier, ok := TierOf(ev.Medium)
	if !ok {
		return out, arena, &Reject{ReasonMedium, fmt.Errorf("%w: medium %.32q", ErrRefused, ev.Medium)}
	}
	out.Tier = tier
	switch ev.Kind {
	case routing.EventRemoved:
		if len(ev.Hashes) == 0 {
			return out, arena, &Reject{ReasonMalformed, fmt.Errorf("%w: BlockRemoved without blocks", ErrRefused)}
		}
		out.Removed = append([]routing.EngineHash(nil), ev.Hashes...)
	case routing.EventStored:
		if rej := c.checkStored(ev); rej != nil {
			return out, arena, rej
		}
		out.Parent, out.HasParent = ev.Parent, ev.HasParent
		start := len(arena)
		arena = c.hashBlocks(arena, ev)
		out.Blocks = arena[start:len(arena):len(arena)]
	}
	return out, arena, nil
}

// checkStored refuses a stored event whose blocks are not of the declared
// size or whose tokens do not fill them.
func (c *Converter) checkStored(ev *Event) *Reject {
	if ev.BlockSize != c.blockSize && ev.BlockSize != 0 {
		return &Reject{ReasonBlockSize, fmt.Errorf("%w: block size %d, declared %d", ErrRefused, ev.BlockSize, c.blockSize)}
	}
	if len(ev.Hashes) == 0 || len(ev.Tokens) != len(ev.Hashes)*c.blockSize {
		return &Reject{ReasonTokenCount, fmt.Errorf("%w: %d token ids for %d blocks of %d",
			ErrRefused, len(ev.Tokens), len(ev.Hashes), c.blockSize)}
	}
	if ev.Extra != nil && len(ev.Extra) != len(ev.Hashes) {
		return &Reject{ReasonMalformed, fmt.Errorf("%w: %d extra_keys for %d blocks", ErrRefused, len(ev.Extra), len(ev.Hashes))}
	}
	return nil
}

// hashBlocks appends the event's blocks with the router's local hashes.
func (c *Converter) hashBlocks(arena []routing.StoredBlock, ev *Event) []routing.StoredBlock {
	seed := loraSeed(ev.LoRAName, ev.LoRAID)
	bs := c.blockSize
	for i, h := range ev.Hashes {
		s := seed
		if ev.Extra != nil && ev.Extra[i] != nil && !onlyName(ev.Extra[i], ev.LoRAName) {
			s = extraSeed(seed, ev.Extra[i])
		}
		arena = append(arena, routing.StoredBlock{Engine: h, Local: routing.HashBlock(ev.Tokens[i*bs:(i+1)*bs], s)})
	}
	return arena
}

// onlyName reports whether a block's extra keys hold nothing but the LoRA
// name the seed already covers: an array of strings each equal to it.
func onlyName(raw []byte, name string) bool {
	var keys []any
	if err := msgpack.Unmarshal(raw, &keys); err != nil {
		return false
	}
	for _, k := range keys {
		if s, ok := k.(string); !ok || s != name || name == "" {
			return false
		}
	}
	return true
}

// TierOf maps an event's medium to a router tier: absent or an
// accelerator's memory is the device tier; vLLM's "CPU" and SGLang's
// "CPU_TIER1" (HiCache L2) host memory; vLLM's "STORAGE", SGLang's
// "CPU_TIER2" (L3) and disk-like names the disk tier; the reference's
// names of its external tier ("EXTERNAL", "SHARED", "REMOTE", "NETWORK")
// the shared tier, a store the DC's engines share (routing.TierShared).
// Matching ignores case.
func TierOf(medium string) (routing.Tier, bool) {
	switch strings.ToUpper(medium) {
	case "", "GPU", "CUDA", "HBM", "DEVICE", "NPU", "XPU", "TPU":
		return routing.TierDevice, true
	case "CPU", "HOST", "CPU_PINNED", "CPU_TIER1", "DRAM":
		return routing.TierHost, true
	case "DISK", "SSD", "NVME", "LOCAL_DISK", "FILE", "STORAGE", "CPU_TIER2":
		return routing.TierDisk, true
	case "EXTERNAL", "SHARED", "REMOTE", "NETWORK":
		return routing.TierShared, true
	}
	return 0, false
}
