package vllmevents

import (
	"errors"

	"github.com/kvrouter/kvrouter/routing"
)

// Reasons label kvrouter_vllmevents_rejected_total: one per kind of bad
// input, so that an operator can tell a misconfigured declaration (block
// size, topic, rank) from a broken or newer engine (msgpack, event tags).
const (
	// ReasonMalformed: the payload is not msgpack, or not a KVEventBatch.
	ReasonMalformed = "malformed_msgpack"
	// ReasonFrames: the message is not [topic, 8-byte sequence, payload].
	ReasonFrames = "malformed_frames"
	// ReasonUnknownEvent: an event's tag names no known event class.
	ReasonUnknownEvent = "unknown_event"
	// ReasonBlockSize: a stored event's block size is not the declared one.
	ReasonBlockSize = "block_size_mismatch"
	// ReasonTokenCount: a stored event's token ids do not fill its blocks.
	ReasonTokenCount = "token_count_mismatch"
	// ReasonMedium: an event names a storage medium with no router tier.
	ReasonMedium = "unknown_medium"
	// ReasonTopic: the message's topic is not the declared one.
	ReasonTopic = "wrong_topic"
	// ReasonRank: the batch names another data-parallel rank.
	ReasonRank = "wrong_rank"
	// ReasonRegression: the sequence went back (an engine restart).
	ReasonRegression = "sequence_regression"
	// ReasonTooLarge: the payload exceeds Config.MaxPayloadBytes.
	ReasonTooLarge = "too_large"
)

// Errors of this package.
var (
	// ErrMalformed wraps every reason a payload does not decode.
	ErrMalformed = errors.New("vllmevents: malformed KV event batch")
	// ErrRefused wraps the reason one event of a batch is refused.
	ErrRefused = errors.New("vllmevents: KV event refused")
	// ErrConfig is returned for an invalid Config.
	ErrConfig = errors.New("vllmevents: invalid config")
	// ErrReplay is returned when a replay request fails.
	ErrReplay = errors.New("vllmevents: replay failed")
)

// Event is one engine event as decoded, before hashing. Slices point into
// the Decoder's buffers and the payload: they are valid until the
// Decoder's next Decode.
type Event struct {
	Kind      routing.EventKind
	Hashes    []routing.EngineHash
	Parent    routing.EngineHash
	HasParent bool
	// Tokens are the token ids of the stored blocks, BlockSize each.
	Tokens []uint32
	// BlockSize is the event's block_size, or the common value of its
	// num_toks_per_block (the earliest layout); -1 when those differ.
	BlockSize int
	// LoRAID is the deprecated lora_id (0 when absent or null).
	LoRAID   int64
	LoRAName string
	// Medium is the storage medium ("GPU", "CPU", …); empty when absent.
	Medium string
	// Group is group_idx, the KV cache group of hybrid models.
	Group    int64
	HasGroup bool
	// SpecKind is kv_cache_spec_kind ("full_attention", …), if sent.
	SpecKind string
	// Extra holds each block's raw msgpack extra_keys entry (nil for none);
	// Extra is nil when the event has none.
	Extra [][]byte
}

// Batch is one decoded KVEventBatch.
type Batch struct {
	// TS is the engine's timestamp in seconds since the epoch.
	TS     float64
	Events []Event
	// Rank is data_parallel_rank, when HasRank.
	Rank    int64
	HasRank bool
	// Rejects are the events of the batch that decoded but were refused
	// (an unknown tag); they are not in Events.
	Rejects []Reject
}

// Reject is one refused event: its reason label and a description.
type Reject struct {
	Reason string
	Err    error
}
