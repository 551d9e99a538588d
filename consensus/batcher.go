package consensus

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// ErrBacklog is returned by Batcher.Add when the pending events exceed
// the backlog bound: raft is not keeping up (or there is no leader), and
// the caller should drop the batch and resync the worker later.
var ErrBacklog = errors.New("consensus: KV event backlog full")

// BatcherConfig configures a Batcher.
type BatcherConfig struct {
	// Interval is the longest an event waits for its entry (default 5 ms):
	// short against routing's tolerance of apply lag, long enough to
	// coalesce a busy DC's events into few entries.
	Interval time.Duration
	// EntryBytes is the target size of one entry (default a quarter of
	// the node's MaxCommandBytes); Add wakes the flusher once it is
	// reached.
	EntryBytes int
	// BacklogBytes bounds the pending events (default 16 entries).
	BacklogBytes int
	// InFlight bounds the entries proposed and not yet applied (default
	// 4). Waiting for each entry before proposing the next caps throughput
	// at one entry per commit round trip plus apply, while the CPU idles;
	// a few entries in flight keep the log and every FSM busy. The bound
	// keeps the apply queue, and so the event-to-visible lag, short.
	InFlight int
}

// DefaultBatcherInFlight is BatcherConfig.InFlight's default.
const DefaultBatcherInFlight = 4

// Batcher coalesces the KV event batches of many workers into
// RaftKVEvents entries. Any node may run one: a follower's entries are
// forwarded to the leader.
//
// Concurrency: Add and Flush are safe for concurrent use; Run is called
// once, by the owner, who stops it by cancelling its context.
type Batcher struct {
	n    *Node
	cfg  BatcherConfig
	wake chan struct{}

	mu sync.Mutex
	// pending holds each queued batch's encoding (a KVEventBatch).
	pending [][]byte
	bytes   int
	flushMu sync.Mutex
	// failed counts the entries that failed to commit (their batches
	// were dropped), by Run and by Flush.
	failed atomic.Uint64
}

// NewBatcher returns a batcher writing through n.
func NewBatcher(n *Node, cfg BatcherConfig) *Batcher {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Millisecond
	}
	if cfg.EntryBytes <= 0 || cfg.EntryBytes > n.cfg.MaxCommandBytes/2 {
		cfg.EntryBytes = n.cfg.MaxCommandBytes / 4
	}
	if cfg.BacklogBytes <= 0 {
		cfg.BacklogBytes = 16 * cfg.EntryBytes
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = DefaultBatcherInFlight
	}
	return &Batcher{n: n, cfg: cfg, wake: make(chan struct{}, 1)}
}

// Add validates one rank's run of events (wire.CheckRun: one worker,
// contiguous ids) and queues it as one batch. The batch is encoded here,
// once: an entry is the concatenation of its batches' encodings.
func (b *Batcher) Add(events []routing.Event) error {
	if err := wire.CheckRun(events); err != nil {
		return fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	return b.queue(wire.EncodeBatch(events[0].Worker, 0, events))
}

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

// queue encodes one batch and appends it to the pending ones.
func (b *Batcher) queue(batch *kvrpb.KVEventBatch) error {
	data, err := deterministic.Marshal(batch)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	if size := len(data); size > b.cfg.EntryBytes {
		return fmt.Errorf("%w: batch of %d bytes over an entry's %d", ErrTooLarge, size, b.cfg.EntryBytes)
	}
	return b.push(data)
}

// push appends one encoded batch to the pending ones, and wakes the
// flusher once an entry's worth is pending.
func (b *Batcher) push(data []byte) error {
	size := len(data)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes+size > b.cfg.BacklogBytes {
		return fmt.Errorf("%w: %d bytes pending", ErrBacklog, b.bytes)
	}
	b.pending = append(b.pending, data)
	b.bytes += size
	if b.bytes >= b.cfg.EntryBytes {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// Run proposes every Interval, or sooner when an entry's worth is
// pending, until ctx ends; it does not wait for one flush's entries to
// apply before proposing the next, but keeps at most InFlight entries
// outstanding. Errors are logged: a failed entry's batches are dropped
// (see Flush). Run returns once ctx ended and its outstanding entries
// resolved (applied, or failed by a leadership change or shutdown).
func (b *Batcher) Run(ctx context.Context) {
	p := newPipe(b.cfg.InFlight, func(_ int, err error) {
		if err != nil {
			b.failed.Add(1)
		}
		if err != nil && ctx.Err() == nil {
			b.n.log.Warn("proposing KV events", "err", err)
		}
	})
	defer p.close()
	t := time.NewTicker(b.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.wake:
		}
		b.flushMu.Lock()
		err := b.proposeAll(ctx, b.take(), p)
		b.flushMu.Unlock()
		if err != nil && ctx.Err() == nil {
			b.n.log.Warn("proposing KV events", "err", err)
		}
	}
}

// Flush proposes the pending batches, with up to InFlight entries in
// flight, waits for them and returns how many batches committed. A failed
// entry's batches are dropped: events are self-healing (the worker's
// cursor stays, and the next batch shows a gap that triggers a resync),
// while retrying could reorder them. The first error is returned.
func (b *Batcher) Flush(ctx context.Context) (int, error) {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	done, failed := 0, error(nil)
	p := newPipe(b.cfg.InFlight, func(batches int, err error) {
		if failed = cmp.Or(failed, err); err == nil {
			done += batches
		} else {
			b.failed.Add(1)
		}
	})
	err := b.proposeAll(ctx, b.take(), p)
	p.close() // after close, collect has returned: done and failed are settled
	return done, cmp.Or(failed, err)
}

// take removes and returns the pending batches.
func (b *Batcher) take() [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	all := b.pending
	b.pending, b.bytes = nil, 0
	return all
}

// proposeAll proposes all as entries, in order, each after p admitted it
// (p bounds the entries in flight). It stops at the first entry that
// cannot be admitted or proposed; the rest are dropped.
func (b *Batcher) proposeAll(ctx context.Context, all [][]byte, p *pipe) error {
	for len(all) > 0 {
		if err := p.admit(ctx); err != nil {
			return err
		}
		data, n := b.entry(all)
		wait, err := b.n.proposeData(ctx, data)
		if err != nil {
			p.release()
			return err
		}
		p.push(proposal{batches: n, wait: wait})
		all = all[n:]
	}
	return nil
}

// batchesField is RaftKVEvents' repeated batch field.
var batchesField = (&kvrpb.RaftKVEvents{}).ProtoReflect().Descriptor().Fields().ByName("batches").Number()

// entry encodes the leading batches that fit one entry (at least one) and
// returns the entry and how many batches it carries. A message's encoding
// is its fields' encodings in turn, so each batch's bytes are framed as
// one batches field, not encoded again: the entry is what marshalling
// RaftKVEvents would give.
func (b *Batcher) entry(all [][]byte) ([]byte, int) {
	size := headerBytes
	n := 0
	for n < len(all) && n < MaxBatchesPerEntry {
		size += protowire.SizeTag(batchesField) + protowire.SizeBytes(len(all[n]))
		if n > 0 && size > b.cfg.EntryBytes {
			break
		}
		n++
	}
	data := append(make([]byte, 0, size), byte(TypeKVEvents), payloadVersion)
	for _, batch := range all[:n] {
		data = protowire.AppendTag(data, batchesField, protowire.BytesType)
		data = protowire.AppendBytes(data, batch)
	}
	return data, n
}
