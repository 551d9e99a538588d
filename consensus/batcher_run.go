package consensus

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// ErrEventTooLarge is returned by AddRun for an event whose encoding
// alone exceeds an entry: no raft entry can carry it, so it is refused
// rather than proposed (it would be refused by every size check after
// it, and the rank's stream would stall there). It wraps ErrTooLarge.
var ErrEventTooLarge = fmt.Errorf("%w: one KV event over an entry", ErrTooLarge)

// batchHeaderBytes bounds a KVEventBatch's fields other than its events:
// engine id and rank (incarnation 0 is not encoded), tags included.
const batchHeaderBytes = 1 + binary.MaxVarintLen64 + 1 + binary.MaxVarintLen32

// AddRun queues a run of one rank's events (wire.CheckRun) as batches
// that each fit an entry by their encoded bytes, not by their count: a
// few events of tens of thousands of blocks each exceed an entry long
// before the count limit. It returns how many leading events it queued;
// on an error the event at that position was not. An event that alone
// exceeds an entry gets ErrEventTooLarge; ErrBacklog means raft is not
// keeping up.
func (b *Batcher) AddRun(events []routing.Event) (int, error) {
	if err := wire.CheckRun(events); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	w := events[0].Worker
	pes := make([]*kvrpb.KVEvent, len(events))
	for lo := 0; lo < len(events); {
		hi, size := lo, batchHeaderBytes
		for ; hi < len(events) && hi-lo < wire.MaxEventsPerBatch; hi++ {
			pes[hi] = wire.EncodeEvent(&events[hi])
			n := proto.Size(pes[hi])
			size += 1 + protowire.SizeBytes(n)
			if size > b.cfg.EntryBytes {
				break
			}
		}
		if hi == lo {
			return lo, fmt.Errorf("%w: event %d of %v: %d bytes, an entry holds %d", ErrEventTooLarge, events[lo].ID, w, size, b.cfg.EntryBytes)
		}
		if err := b.queue(&kvrpb.KVEventBatch{EngineId: uint64(w.ID), Rank: w.Rank, Events: pes[lo:hi]}); err != nil {
			return lo, err
		}
		lo = hi
	}
	return len(events), nil
}
