package consensus

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// replaceOverheadBytes is what a replace-rank entry costs besides its
// events: the envelope, engine id, rank, cursor and flags, rounded up.
const replaceOverheadBytes = 64

// storedBlockBytes bounds one encoded stored block: two tagged fixed64s
// inside a tagged, length-prefixed message.
const storedBlockBytes = 2 + 2*9

// RegisterWorker records an engine's card (all its ranks) through raft,
// replacing an earlier card of the same engine id. It is idempotent, so
// indeterminate attempts are retried until ctx ends.
func (n *Node) RegisterWorker(ctx context.Context, card *kvrpb.WorkerCard, dc, pool string) error {
	res, err := n.ApplyRetry(ctx, &kvrpb.RaftRegisterWorker{Card: card, Dc: dc, Pool: pool})
	return resultError("register_worker", res, err)
}

// RemoveWorker drops an engine's whole replicated state through raft: its
// registry row and every rank's ownership rows, engine block ids and
// cursor, in the tables and in every node's index. Bindings to the
// engine are left to Sessions.InvalidateEngine. It returns how many rows
// (card and ranks) it dropped; removing an unknown engine drops none. It
// is idempotent, so indeterminate attempts are retried until ctx ends.
func (n *Node) RemoveWorker(ctx context.Context, id routing.WorkerID) (int, error) {
	res, err := n.ApplyRetry(ctx, &kvrpb.RaftRemoveWorker{EngineId: uint64(id)})
	if err := resultError("remove_worker", res, err); err != nil {
		return 0, err
	}
	return int(res.GetCount()), nil
}

// ReplaceRank replaces rank w's ownership, engine block ids and cursor on
// every node with an engine snapshot: its stored events (ids are not
// used; every event must name w) and the id of the last event it covers.
// The events are split into RaftReplaceRank entries below half of
// Config.MaxCommandBytes (a stored event too large for one entry is split
// into chained parts, which place the same blocks), applied in order
// through the write path, which forwards from a follower.
//
// Each chunk is sent once: after an error (ErrIndeterminate included) the
// rank may hold part of the snapshot with cursor 0, and the caller
// repeats the whole replacement, whose first chunk starts again from an
// empty rank. One replacement of a rank at a time is the caller's duty;
// interleaved replacements of one rank mix their chunks.
func (n *Node) ReplaceRank(ctx context.Context, w routing.Worker, events []routing.Event, cursor uint64) error {
	chunks, err := replaceChunks(w, events, cursor, n.cfg.MaxCommandBytes/2)
	if err != nil {
		return err
	}
	for i, c := range chunks {
		res, err := n.Apply(ctx, c)
		if err := resultError("replace_rank", res, err); err != nil {
			return fmt.Errorf("replacing %v: chunk %d of %d: %w", w, i+1, len(chunks), err)
		}
	}
	return nil
}

// applyIndex is ApplyRetry of a command whose one outcome is CodeOK; it
// returns the entry's index.
func (n *Node) applyIndex(ctx context.Context, name string, m proto.Message) (uint64, error) {
	res, err := n.ApplyRetry(ctx, m)
	if err := resultError(name, res, err); err != nil {
		return 0, err
	}
	return res.GetIndex(), nil
}

// resultError turns a write's error or non-OK result code into an error.
func resultError(name string, res *kvrpb.RaftResult, err error) error {
	if err != nil {
		return err
	}
	if c := Code(res.GetCode()); c != CodeOK {
		return fmt.Errorf("%w: %s answered %v", ErrBadCommand, name, c)
	}
	return nil
}

// replaceChunks encodes events as replace-rank chunks of at most budget
// bytes each; the first is marked first, the last carries the cursor.
func replaceChunks(w routing.Worker, events []routing.Event, cursor uint64, budget int) ([]*kvrpb.RaftReplaceRank, error) {
	maxBlocks := max(1, (budget-replaceOverheadBytes-32)/storedBlockBytes)
	newChunk := func() *kvrpb.RaftReplaceRank {
		return &kvrpb.RaftReplaceRank{EngineId: uint64(w.ID), Rank: w.Rank}
	}
	cur, size := newChunk(), replaceOverheadBytes
	var out []*kvrpb.RaftReplaceRank
	for i := range events {
		parts, err := replaceParts(w, &events[i], maxBlocks)
		if err != nil {
			return nil, fmt.Errorf("%w: replace event %d: %w", ErrBadCommand, i, err)
		}
		for _, pe := range parts {
			n := protowire.SizeBytes(proto.Size(pe)) + 1
			if len(cur.Events) > 0 && (size+n > budget || len(cur.Events) == MaxReplaceEvents) {
				out = append(out, cur)
				cur, size = newChunk(), replaceOverheadBytes
			}
			cur.Events = append(cur.Events, pe)
			size += n
		}
	}
	out = append(out, cur)
	out[0].First = true
	last := out[len(out)-1]
	last.Last, last.Cursor = true, cursor
	return out, nil
}

// replaceParts checks one snapshot event and encodes it, split into
// chained stored events of at most maxBlocks blocks: each part after the
// first names the previous part's last block as its parent, which places
// the same sequence hashes as the whole event.
func replaceParts(w routing.Worker, ev *routing.Event, maxBlocks int) ([]*kvrpb.KVEvent, error) {
	if ev.Worker != w {
		return nil, fmt.Errorf("%w: %v, not %v", errReplaceWorker, ev.Worker, w)
	}
	if ev.Kind != routing.EventStored {
		return nil, fmt.Errorf("%w: kind %d is not a stored event", routing.ErrBadEvent, ev.Kind)
	}
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	var out []*kvrpb.KVEvent
	part := *ev
	for len(part.Blocks) > maxBlocks {
		head := part
		head.Blocks = part.Blocks[:maxBlocks]
		out = append(out, wire.EncodeEvent(&head))
		part.Parent, part.HasParent = part.Blocks[maxBlocks-1].Engine, true
		part.Blocks = part.Blocks[maxBlocks:]
	}
	return append(out, wire.EncodeEvent(&part)), nil
}
