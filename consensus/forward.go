package consensus

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// forwardedKey is the gRPC metadata key that marks a forwarded call; its
// value is the forwarding node's id.
const forwardedKey = "x-kvr-forwarded"

// statusTable is the one mapping between the write path's errors and gRPC
// status codes, used by the server to answer and by the client to map an
// answer back. The first matching row wins. Anything else a call returns
// (deadline, cancellation, a broken connection) is indeterminate, since
// the leader may have applied the command.
var statusTable = []struct {
	err  error
	code codes.Code
}{
	{ErrBadCommand, codes.InvalidArgument},
	{ErrTooLarge, codes.OutOfRange},
	{ErrNotReady, codes.FailedPrecondition},
	{ErrForwardLoop, codes.Aborted},
	{ErrUnauthorized, codes.PermissionDenied},
	{ErrNoLeader, codes.Aborted},
	{ErrHalted, codes.DataLoss},
	// ResourceExhausted, not Unavailable: gRPC's client produces
	// Unavailable itself for a connection lost mid-call (indeterminate),
	// while its own ResourceExhausted is a message over the size limit,
	// refused before the leader proposed anything, as a full disk is.
	{ErrDiskFull, codes.ResourceExhausted},
	{ErrIndeterminate, codes.Unknown},
}

// toStatus maps a write-path error to a gRPC status.
func toStatus(err error) error {
	for _, row := range statusTable {
		if errors.Is(err, row.err) {
			return status.Error(row.code, err.Error())
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

// fromStatus maps a forwarding call's error back to a sentinel.
func fromStatus(err error) error {
	st, _ := status.FromError(err)
	for _, row := range statusTable {
		if st.Code() == row.code && row.code != codes.Unknown {
			return fmt.Errorf("%w: leader said: %s", row.err, st.Message())
		}
	}
	return fmt.Errorf("%w: forwarding: %w", ErrIndeterminate, err)
}

// forwardServer serves RaftForward for a node.
type forwardServer struct {
	kvrpb.UnimplementedRaftForwardServer
	n *Node
}

// RegisterForwarding registers the node's RaftForward service on s. The
// owner of s starts and stops it.
func (n *Node) RegisterForwarding(s grpc.ServiceRegistrar) {
	kvrpb.RegisterRaftForwardServer(s, &forwardServer{n: n})
}

// Apply implements kvrpb.RaftForwardServer. A call marked as forwarded is
// applied only if this node leads.
func (s *forwardServer) Apply(ctx context.Context, req *kvrpb.RaftApplyRequest) (*kvrpb.RaftApplyResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	forwarded := len(md.Get(forwardedKey)) > 0
	res, err := s.n.applyBytes(ctx, req.GetCommand(), forwarded)
	if err != nil {
		return nil, toStatus(err)
	}
	out, err := proto.Marshal(res)
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: encoding result: %w", ErrIndeterminate, err))
	}
	return &kvrpb.RaftApplyResponse{Result: out}, nil
}

// errLeaderReplaced cancels a forward whose target stopped being the
// leader this node knows.
var errLeaderReplaced = errors.New("leader replaced while forwarding")

// forward sends an encoded command to the leader's forwarding service.
// The call is bounded by ApplyTimeout+HeartbeatTimeout, and cancelled
// sooner when this node's view of the leader moves off its target (a new
// leader, or none after the heartbeat timeout): a leader that was killed,
// paused or cut off answers nothing, and a forward pending on it would
// otherwise hold the write for the whole bound after a new leader is
// serving. The cancelled call is indeterminate (the old leader may have
// committed it), so ApplyRetry sends it again with the same request id.
func (n *Node) forward(ctx context.Context, data []byte) (*kvrpb.RaftResult, error) {
	changed := n.leaderChange.changed()
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return nil, ErrNoLeader
	}
	cc, err := n.conn(id)
	if err != nil {
		return nil, err
	}
	ctx = metadata.AppendToOutgoingContext(ctx, forwardedKey, n.cfg.NodeID)
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout+n.cfg.HeartbeatTimeout)
	defer cancel()
	ctx, cancelReplaced := context.WithCancelCause(ctx)
	defer cancelReplaced(nil)
	go n.cancelOnLeaderChange(ctx, changed, id, cancelReplaced)
	resp, err := kvrpb.NewRaftForwardClient(cc).Apply(ctx, &kvrpb.RaftApplyRequest{Command: data})
	if err != nil {
		if errors.Is(context.Cause(ctx), errLeaderReplaced) {
			return nil, fmt.Errorf("%w: %w: %s", ErrIndeterminate, errLeaderReplaced, id)
		}
		return nil, fromStatus(err)
	}
	res := &kvrpb.RaftResult{}
	if err := proto.Unmarshal(resp.GetResult(), res); err != nil {
		return nil, fmt.Errorf("%w: leader's result: %w", ErrIndeterminate, err)
	}
	return res, nil
}

// cancelOnLeaderChange cancels a forward to target once the node's leader
// is no longer target, until ctx ends.
func (n *Node) cancelOnLeaderChange(ctx context.Context, changed <-chan struct{}, target raft.ServerID, cancel context.CancelCauseFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = n.leaderChange.changed()
		if _, id := n.raft.LeaderWithID(); id != target {
			cancel(errLeaderReplaced)
			return
		}
	}
}

// conn returns a cached client connection to a server's forwarding
// address. grpc.NewClient connects lazily, so this does no I/O.
func (n *Node) conn(id raft.ServerID) (*grpc.ClientConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	addr := n.apis[id]
	if addr == "" {
		return nil, fmt.Errorf("%w: no forwarding address for leader %s", ErrNoLeader, id)
	}
	if n.closed {
		return nil, fmt.Errorf("%w: node shut down", ErrNoLeader)
	}
	if cc, ok := n.conns[addr]; ok {
		return cc, nil
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, n.cfg.DialOptions...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: dialing leader %s at %s: %w", ErrNoLeader, id, addr, err)
	}
	n.conns[addr] = cc
	return cc, nil
}

// SetPeerAPI records the forwarding address of a server, for members that
// joined after start.
func (n *Node) SetPeerAPI(id, apiAddr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.apis[raft.ServerID(id)] = apiAddr
}
