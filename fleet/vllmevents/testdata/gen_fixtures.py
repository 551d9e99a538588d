#!/usr/bin/python3
"""Regenerates the conformance fixtures: one JSON file per KV-event wire
layout that vLLM or SGLang has published, each a short stream of msgpack
KVEventBatch payloads (hex) and the index contents they must produce.

The layouts are written from the event structures in vLLM's
vllm/distributed/kv_events.py and SGLang's
python/sglang/srt/disaggregation/kv_events.py (msgspec structs: array_like
with omit_defaults, tag = class name first; later maps with the tag under
"type"). Each fixture names the releases whose field list it follows.

Needs Debian's python3-msgpack (apt-get install -y python3-msgpack):
    /usr/bin/python3 gen_fixtures.py    (from this directory)
"""
import json
import msgpack

BS = 4  # block size of every fixture, in tokens


def toks(base, n):
    return list(range(base, base + n))


A = toks(100, 12)  # a three-block sequence
B = toks(500, 4)   # a one-block sequence, removed again
C = toks(900, 8)   # a two-block sequence


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True).hex()


def chain(tokens, device=0, host=0, disk=0, lora=""):
    return {"tokens": tokens, "lora": lora, "device": device, "host": host, "disk": disk}


def write(name, releases, batches, chains, pairs, rejected=None, skipped=None):
    doc = {
        "layout": name,
        "releases": releases,
        "block_size": BS,
        "batches": [pack(b) for b in batches],
        "expect": {"chains": chains, "pairs": pairs,
                   "rejected": rejected or {}, "skipped": skipped or {}},
    }
    with open(name + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


# The layout of KV events as first merged into vLLM (its example
# subscriber): BlockStored's fourth field is num_toks_per_block, one count
# per block. Hashes are Python hash() values, which may be negative.
write("vllm-num-toks-per-block",
      "vLLM before 0.9.0 (first KV events layout)",
      [
          [1.0, [["BlockStored", [-11, -12], None, A[:8], [BS, BS], None]]],
          [2.0, [["BlockStored", [-13], -12, A[8:], [BS], None],
                 ["BlockStored", [21], None, B, [BS], None]]],
          [3.0, [["BlockRemoved", [21]]]],
      ],
      [chain(A, device=3), chain(B)], 3)

# vLLM 0.9.x: block_size replaces num_toks_per_block; the batch is
# [ts, events]; BlockRemoved carries only the hashes. AllBlocksCleared
# empties the engine, after which C is stored.
write("vllm-0.9",
      "vLLM 0.9.x; SGLang's first layout has the same fields",
      [
          [1.0, [["BlockStored", [11, 12, 13], None, A, BS, None]]],
          [2.0, [["AllBlocksCleared"]]],
          [3.0, [["BlockStored", [31, 32], None, C, BS, None]]],
      ],
      [chain(A), chain(C, device=2)], 2)

# vLLM 0.10-0.11: medium on both events, data_parallel_rank in the batch,
# SHA-256-derived hashes as unsigned 64-bit ints (above MaxInt64). A
# BlockStored with medium "CPU" lands on the host tier; an unknown event
# tag from a newer engine is refused alone.
big = 2**64 - 5
write("vllm-0.10-medium",
      "vLLM 0.10.x and 0.11.x (medium, data_parallel_rank, 64-bit unsigned hashes)",
      [
          [1.0, [["BlockStored", [big, big - 1], None, A[:8], BS, None, "GPU"],
                 ["BlockStored", [7, 8], None, C, BS, None, "CPU"]], 0],
          [2.0, [["BlockStored", [big - 2], big - 1, A[8:], BS, None, "GPU"],
                 ["BlockStored", [41], None, B, BS, None, "GPU"],
                 ["BlockMoved", [41], "GPU"]], 0],
          [3.0, [["BlockRemoved", [41], "GPU"]], 0],
      ],
      [chain(A, device=3), chain(B), chain(C, host=2)], 6 - 1,
      rejected={"unknown_event": 1})

# vLLM 0.12 onwards (array layout): hashes may be bytes
# (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0), lora_name follows medium, and
# extra_keys carries per-block keys: the LoRA name alone changes nothing,
# a cache salt makes the block unmatchable by plain requests.
h = [bytes([i]) * 32 for i in range(1, 8)]
write("vllm-0.12-bytes-lora",
      "vLLM 0.12 to 0.2x, array layout (bytes hashes, lora_name, extra_keys)",
      [
          [1.0, [["BlockStored", h[0:2], None, A[:8], BS, None, "GPU", None]], 0],
          [2.0, [["BlockStored", h[2:3], h[1], A[8:], BS, None, "GPU", None],
                 ["BlockStored", h[3:5], None, C, BS, 1, "GPU", "adapter-a",
                  [["adapter-a"], ["adapter-a"]]],
                 ["BlockStored", h[5:6], None, B, BS, None, "GPU", None, [["salt-1"]]]], 0],
      ],
      [chain(A, device=3), chain(C, device=2, lora="adapter-a"), chain(B)], 6)

# vLLM with hybrid-model groups: group_idx, kv_cache_spec_kind and
# kv_cache_spec_sliding_window after extra_keys, plus a field no release
# has yet. The sliding-window group's events are skipped; so is a CPU
# offload placeholder without token ids (block_size 0).
write("vllm-groups",
      "vLLM 0.2x with hybrid KV cache groups, array layout",
      [
          [1.0, [["BlockStored", [1, 2], None, A[:8], BS, None, "GPU", None, None, 0, "full_attention", None, "future"],
                 ["BlockStored", [1, 2], None, A[:8], BS, None, "GPU", None, None, 1, "sliding_window", 128]], 0],
          [2.0, [["BlockStored", [3], 2, A[8:], BS, None, "GPU", None, None, 0, "full_attention"],
                 ["BlockRemoved", [1, 2], "GPU", 1],
                 ["BlockStored", [3], None, [], 0, None, "CPU", None]], 0],
      ],
      [chain(A, device=3)], 3, skipped={"group": 2, "no_tokens": 1})

# The newest vLLM encodes events (and the batch) as maps with the tag under
# "type", and adds keys such as locality.
write("vllm-map",
      "vLLM after the switch to map-encoded events (0.26 and later)",
      [
          {"ts": 1.0, "events": [
              {"type": "BlockStored", "block_hashes": [5, 6, 7], "parent_block_hash": None,
               "token_ids": A, "block_size": BS, "lora_id": None, "medium": "GPU",
               "lora_name": None, "group_idx": 0, "kv_cache_spec_kind": "full_attention",
               "locality": "local"}], "data_parallel_rank": 0},
          {"ts": 2.0, "events": [
              {"type": "BlockStored", "block_hashes": [9], "parent_block_hash": None, "token_ids": B,
               "block_size": BS, "lora_id": None, "medium": "GPU", "lora_name": None},
              {"type": "BlockRemoved", "block_hashes": [9], "medium": "GPU", "group_idx": 0},
              {"type": "AllBlocksCleared"},
              {"type": "BlockStored", "block_hashes": [5], "parent_block_hash": None,
               "token_ids": A[:4], "block_size": BS, "lora_id": None, "medium": "GPU", "lora_name": None}],
           "data_parallel_rank": 0},
      ],
      [chain(A, device=1), chain(B)], 1)

# SGLang's radix cache publishes one BlockStored per page (block_size =
# page size), chained by parent_block_hash, with hash(tuple(tokens)) ints;
# the batch is [ts, events]. Later SGLang adds medium ("GPU", "CPU_TIER1"
# for HiCache's host tier).
write("sglang",
      "SGLang 0.4.7 onwards (radix cache, one event per page); medium from 0.5.x",
      [
          [1.0, [["BlockStored", [-101], None, A[0:4], BS, None],
                 ["BlockStored", [-102], -101, A[4:8], BS, None],
                 ["BlockStored", [-103], -102, A[8:12], BS, None]]],
          [2.0, [["BlockStored", [201], None, C[0:4], BS, None, "CPU_TIER1"],
                 ["BlockStored", [202], 201, C[4:8], BS, None, "CPU_TIER1"],
                 ["BlockStored", [301], None, B, BS, None, "GPU"],
                 ["BlockRemoved", [301], "GPU"]]],
      ],
      [chain(A, device=3), chain(B), chain(C, host=2)], 5)

# Bad input: a block size other than the declared one, token ids that do
# not fill the blocks, an unknown medium. Each is refused alone.
write("bad-events",
      "refusals (no release sends these)",
      [
          [1.0, [["BlockStored", [1], None, toks(0, 8), 8, None],
                 ["BlockStored", [2], None, toks(0, 5), BS, None],
                 ["BlockStored", [3], None, toks(0, 4), BS, None, "TAPE"],
                 ["BlockStored", [4], None, B, BS, None]]],
      ],
      [chain(B, device=1)], 1,
      rejected={"block_size_mismatch": 1, "token_count_mismatch": 1, "unknown_medium": 1})
