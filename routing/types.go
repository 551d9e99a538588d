package routing

import (
	"cmp"
	"fmt"
)

// WorkerID identifies one inference engine (a vLLM/SGLang-style worker).
type WorkerID uint64

// Worker is the unit of routing: one data-parallel rank of one engine. Each
// rank has its own KV cache and its own event stream.
type Worker struct {
	ID   WorkerID
	Rank uint32
}

// String renders the worker as "id/rank" for logs and reports.
func (w Worker) String() string { return fmt.Sprintf("%d/%d", w.ID, w.Rank) }

// Compare orders workers by engine id, then rank; it returns -1, 0 or +1
// like cmp.Compare. Indexes and selectors sort by it so that their outputs
// merge in one pass and never depend on map order.
func (w Worker) Compare(o Worker) int {
	if c := cmp.Compare(w.ID, o.ID); c != 0 {
		return c
	}
	return cmp.Compare(w.Rank, o.Rank)
}

// Tier is the storage tier that holds a KV block.
type Tier uint8

// The tiers, fastest first. A block on a lower tier must be copied to the
// device before it can be used, which is why the cost model credits it less.
const (
	TierDevice Tier = iota
	TierHost
	TierDisk
	// TierShared is a KV store shared by the engines of a DC, outside any
	// one of them: an external pool such as SGLang HiCache's L3 on
	// Mooncake or LMCache's remote backend, which engines report under the
	// media EXTERNAL, SHARED, REMOTE or NETWORK. The engine that stored a
	// block there does not own it alone: every engine whose prompt has the
	// block can load it (the block's sequence hash already fixes the model,
	// LoRA, salt and block size), so it counts for all of them as the cost
	// model's shared-cache hits, not in any engine's own prefix.
	TierShared
	// NumTiers is the number of tiers; valid tiers are below it.
	NumTiers
)

// String names the tier as it appears in events and metrics.
func (t Tier) String() string {
	switch t {
	case TierDevice:
		return "device"
	case TierHost:
		return "host"
	case TierDisk:
		return "disk"
	case TierShared:
		return "shared"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Valid reports whether t is one of the defined tiers.
func (t Tier) Valid() bool { return t < NumTiers }

// DeviceKind separates accelerator engines from CPU engines for the
// device-aware-weighted selector.
type DeviceKind uint8

// Device kinds.
const (
	DeviceGPU DeviceKind = iota
	DeviceCPU
)

// LocalHash is the hash of one block's tokens alone (the engine event's
// "tokens hash"); it does not depend on the blocks before it.
type LocalHash uint64

// SeqHash is the chained hash of a block and every block before it: it names
// a prefix, and it is the key of every index.
type SeqHash uint64

// EngineHash is an engine's own, opaque block id. It is only used to link a
// stored block to its parent and to resolve removals.
type EngineHash uint64

// WorkerInfo is what an engine advertises about one rank: its capacity and
// the limits the eligibility filters compare load against.
type WorkerInfo struct {
	Worker Worker
	// Model is the served model name.
	Model string
	// BlockSize is the KV block size in tokens.
	BlockSize int
	// TotalBlocks is the device KV capacity of the rank in blocks.
	TotalBlocks int
	// MaxBatchedTokens is the engine's max_num_batched_tokens per iteration.
	MaxBatchedTokens int
	// Device says whether the rank runs on an accelerator or a CPU.
	Device DeviceKind
	// Role is the rank's part in disaggregated serving (aggregated by
	// default).
	Role Role
	// TransferDomain names the topology domain (a rack, a zone) within
	// which the rank can exchange KV caches with others; empty when the
	// engine reports none. A decode rank must share its prefill rank's
	// domain when both report one.
	TransferDomain string
}

// Overlap is how much of a request's prefix a worker already holds, in
// blocks. Device is the depth of the prefix on the device tier; Host is the
// run of blocks held on host memory that continues right after the device
// prefix, and Disk the run on disk after that. The three are disjoint, so
// their credits add. The shared tier is no worker's own and is not part
// of an Overlap (see TierShared).
type Overlap struct {
	Device int32
	Host   int32
	Disk   int32
}

// Total is the whole prefix depth reachable from any tier.
func (o Overlap) Total() int32 { return o.Device + o.Host + o.Disk }

// Match is one worker's overlap with a request.
type Match struct {
	Worker Worker
	Overlap
}

// Load is a worker's projected load, the inputs of the cost model.
type Load struct {
	// PrefillTokens is the number of prompt tokens still to be prefilled by
	// requests that have not produced their first token.
	PrefillTokens int64
	// DecodeBlocks is the number of KV blocks held by active requests.
	DecodeBlocks int64
	// ActiveRequests is the number of requests in flight on the worker.
	ActiveRequests int64
}
