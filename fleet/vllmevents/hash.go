package vllmevents

import (
	"strconv"

	"github.com/zeebo/xxh3"

	"github.com/kvrouter/kvrouter/routing"
)

// BytesHash maps an engine's bytes block hash (vLLM's SHA-256 digests when
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0) to an EngineHash: XXH3-64 of the
// bytes with seed 0. Any deterministic map would do, since engine hashes
// only link events of one engine; this one spreads digests of any length.
func BytesHash(b []byte) routing.EngineHash { return routing.EngineHash(xxh3.Hash(b)) }

// loraSeed is the local-hash seed of an event's blocks: routing.Seed of
// the LoRA name, as the request path seeds requests for that adapter.
// Older layouts carry only the numeric lora_id, whose adapter name the
// router cannot know; "lora-id:<n>" keeps those blocks apart from the base
// model and from each other.
func loraSeed(name string, id int64) uint64 {
	if name == "" && id != 0 {
		name = "lora-id:" + strconv.FormatInt(id, 10)
	}
	return routing.Seed(name, "")
}

// extraSeed folds a block's opaque extra keys into its seed: XXH3 of their
// raw msgpack, added to the LoRA seed. Blocks keyed by more than their
// tokens (images, a cache salt) then never collide with plain blocks.
func extraSeed(seed uint64, raw []byte) uint64 {
	return seed + xxh3.HashSeed(raw, 2)
}
