package consensus

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// WatchChunkHashes bounds the hashes of one snapshot chunk: 32,768 fixed64
// hashes are 256 KiB, a sixteenth of gRPC's default 4 MiB message limit.
// A batch message is not split: it holds at most the blocks of one entry
// (below Config.MaxCommandBytes), each named at most twice (a reused
// engine block id removes one hash and stores another).
const WatchChunkHashes = 1 << 15

// watchBatchesPerRead is how many batches one read of the ring takes.
const watchBatchesPerRead = 64

// errWatchStopped ends a watch when the node shuts down.
var errWatchStopped = errors.New("consensus: node shutting down")

// ownershipServer serves the Ownership service from one FSM's change log.
type ownershipServer struct {
	kvrpb.UnimplementedOwnershipServer
	f    *FSM
	stop <-chan struct{}
}

// RegisterOwnership registers the node's Ownership service (the ownership
// change stream, proto/kvr/v1/ownership.proto) on s, the node's cluster
// API server. The owner of s starts and stops it; streams also end with
// UNAVAILABLE when the node shuts down, so a graceful stop of s does not
// wait for them.
func (n *Node) RegisterOwnership(s grpc.ServiceRegistrar) {
	kvrpb.RegisterOwnershipServer(s, &ownershipServer{f: n.fsm, stop: n.stop})
}

// Watch implements kvrpb.OwnershipServer: a snapshot when the ring does not
// cover from_index, then every batch after the position, as they are
// applied. See the proto file for the client's actions on each error.
func (s *ownershipServer) Watch(req *kvrpb.OwnershipWatchRequest, stream grpc.ServerStreamingServer[kvrpb.OwnershipWatchMessage]) error {
	pos := req.GetFromIndex()
	if !s.f.Ownership().Covers(pos) {
		snap := s.f.OwnershipSnapshot()
		if err := sendSnapshot(stream, snap); err != nil {
			return err
		}
		pos = snap.Index
	}
	return s.follow(stream, pos)
}

// follow sends every batch after pos until the stream or the node ends,
// or the watcher falls out of the ring.
func (s *ownershipServer) follow(stream grpc.ServerStreamingServer[kvrpb.OwnershipWatchMessage], pos uint64) error {
	log := s.f.Ownership()
	var buf []OwnershipBatch
	for {
		wake := log.Changed()
		bs, err := log.Since(pos, buf[:0], watchBatchesPerRead)
		if err != nil {
			return status.Error(codes.OutOfRange, err.Error())
		}
		for i := range bs {
			msg := &kvrpb.OwnershipWatchMessage{Body: &kvrpb.OwnershipWatchMessage_Batch{Batch: BatchToProto(&bs[i])}}
			if err := stream.Send(msg); err != nil {
				return err
			}
			pos = bs[i].Index
		}
		clear(bs)
		buf = bs
		if len(bs) > 0 {
			continue
		}
		if err := s.wait(stream.Context(), wake); err != nil {
			return err
		}
	}
}

// wait blocks until wake fires, the stream ends or the node stops.
func (s *ownershipServer) wait(ctx context.Context, wake <-chan struct{}) error {
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-s.stop:
		return status.Error(codes.Unavailable, errWatchStopped.Error())
	}
}

// sendSnapshot sends snap in chunks of at most WatchChunkHashes hashes.
func sendSnapshot(stream grpc.ServerStreamingServer[kvrpb.OwnershipWatchMessage], snap OwnershipSnapshot) error {
	chunks := SnapshotChunks(snap, WatchChunkHashes)
	for _, c := range chunks {
		if err := stream.Send(&kvrpb.OwnershipWatchMessage{Body: &kvrpb.OwnershipWatchMessage_Snapshot{Snapshot: c}}); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotChunks splits snap into chunks of at most maxHashes hashes,
// block and session hashes together (a rank or the session list may span
// chunks); there is always at least one chunk, and the last one is
// marked.
func SnapshotChunks(snap OwnershipSnapshot, maxHashes int) []*kvrpb.OwnershipSnapshotChunk {
	maxHashes = max(maxHashes, 1)
	out := []*kvrpb.OwnershipSnapshotChunk{{Index: snap.Index}}
	room := maxHashes
	// take returns the chunk the next of n hashes go to and how many of
	// them it has room for, starting a chunk when the last one is full.
	take := func(n int) (*kvrpb.OwnershipSnapshotChunk, int) {
		if room == 0 {
			out, room = append(out, &kvrpb.OwnershipSnapshotChunk{Index: snap.Index, Seq: uint32(len(out))}), maxHashes
		}
		k := min(room, n)
		room -= k
		return out[len(out)-1], k
	}
	for _, r := range snap.Ranks {
		for hs := r.Hashes; len(hs) > 0; {
			c, n := take(len(hs))
			c.Ranks = append(c.Ranks, &kvrpb.OwnershipRank{
				EngineId: uint64(r.Worker.ID), Rank: r.Worker.Rank, Hashes: seqsToWire(hs[:n]),
			})
			hs = hs[n:]
		}
	}
	for hs := snap.Sessions; len(hs) > 0; {
		c, n := take(len(hs))
		c.Sessions = append(c.Sessions, hs[:n]...)
		hs = hs[n:]
	}
	out[len(out)-1].Last = true
	return out
}

// BatchToProto converts a batch to its wire form.
func BatchToProto(b *OwnershipBatch) *kvrpb.OwnershipBatch {
	out := &kvrpb.OwnershipBatch{Index: b.Index, PrevIndex: b.Prev, Changes: make([]*kvrpb.OwnershipChange, len(b.Changes))}
	for i, c := range b.Changes {
		out.Changes[i] = &kvrpb.OwnershipChange{
			Kind:     kvrpb.OwnershipChangeKind(c.Kind),
			EngineId: uint64(c.Worker.ID), Rank: c.Worker.Rank, Hashes: seqsToWire(c.Hashes),
		}
	}
	// The ring's batches are shared and immutable, and the message is only
	// marshalled, so the session lists need no copy.
	out.SessionsBound, out.SessionsUnbound = b.SessionsBound, b.SessionsUnbound
	return out
}

// seqsToWire copies sequence hashes to their wire type.
func seqsToWire(hs []routing.SeqHash) []uint64 {
	if len(hs) == 0 {
		return nil
	}
	out := make([]uint64, len(hs))
	for i, h := range hs {
		out[i] = uint64(h)
	}
	return out
}
