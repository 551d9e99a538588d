package consensus

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// backupChunkBytes is the data of one backup message: well under gRPC's
// 4 MiB default message limit, large enough that framing costs nothing.
const backupChunkBytes = 1 << 20

// MaxRestoreBytes bounds a restore stream, which the leader holds in
// memory to verify it before anything changes: 4 GiB is far above the
// state of any DC (bindings and block ownership of a few thousand
// engines), and stops a runaway client.
const MaxRestoreBytes = 4 << 30

// backupServer is the ClusterBackup service of one node.
type backupServer struct {
	kvrpb.UnimplementedClusterBackupServer
	n *Node
}

// RegisterBackup registers the ClusterBackup service (backup, restore) on
// s, the server that carries RegisterAdmin.
func (n *Node) RegisterBackup(s grpc.ServiceRegistrar) {
	kvrpb.RegisterClusterBackupServer(s, &backupServer{n: n})
}

// Backup sends the info, then the snapshot in chunks. The snapshot is
// written to memory first, since the info (bindings, index) is known only
// once it is taken; a DC's state fits (see MaxRestoreBytes).
func (s *backupServer) Backup(_ *kvrpb.BackupRequest, stream grpc.ServerStreamingServer[kvrpb.BackupChunk]) error {
	var buf bytes.Buffer
	info, err := s.n.WriteBackup(&buf)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	if err := stream.Send(&kvrpb.BackupChunk{Info: info}); err != nil {
		return err
	}
	for data := buf.Bytes(); len(data) > 0; {
		k := min(len(data), backupChunkBytes)
		if err := stream.Send(&kvrpb.BackupChunk{Data: data[:k]}); err != nil {
			return err
		}
		data = data[k:]
	}
	return nil
}

// Restore collects the stream, then restores it on this node if it
// leads.
func (s *backupServer) Restore(stream grpc.ClientStreamingServer[kvrpb.BackupRestoreChunk, kvrpb.BackupRestoreResponse]) error {
	if !s.n.IsLeader() {
		return s.notLeader()
	}
	var data []byte
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(data)+len(c.GetData()) > MaxRestoreBytes {
			return status.Errorf(codes.ResourceExhausted, "restore stream over %d bytes", int64(MaxRestoreBytes))
		}
		data = append(data, c.GetData()...)
	}
	res, err := s.n.RestoreBackup(bytes.NewReader(data))
	switch {
	case errors.Is(err, ErrBadSnapshot):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrNotLeader):
		return s.notLeader()
	case err != nil:
		return status.Error(codes.Unavailable, err.Error())
	}
	return stream.SendAndClose(res)
}

// notLeader is the FAILED_PRECONDITION answer naming the leader.
func (s *backupServer) notLeader() error {
	_, id := s.n.raft.LeaderWithID()
	return status.Error(codes.FailedPrecondition, fmt.Sprintf("%v: the leader is %q at %q", ErrNotLeader, id, s.n.apiAddr(id)))
}
