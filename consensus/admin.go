package consensus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// adminServer is the ClusterAdmin service of one node.
type adminServer struct {
	kvrpb.UnimplementedClusterAdminServer
	n *Node
}

// RegisterAdmin registers the ClusterAdmin service (status, join, leave)
// on s, which should be the server that carries RegisterForwarding.
func (n *Node) RegisterAdmin(s grpc.ServiceRegistrar) {
	kvrpb.RegisterClusterAdminServer(s, &adminServer{n: n})
}

// Status reports this node's view of the cluster.
func (s *adminServer) Status(context.Context, *kvrpb.AdminStatusRequest) (*kvrpb.AdminStatusResponse, error) {
	return s.n.Status()
}

// Status is this node's view of the cluster: raft state, indexes, members
// and readiness.
func (n *Node) Status() (*kvrpb.AdminStatusResponse, error) {
	stats := n.raft.Stats()
	_, leader := n.raft.LeaderWithID()
	members, err := n.Members()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	applied, hash := n.fsm.StateHash()
	out := &kvrpb.AdminStatusResponse{
		NodeId: n.cfg.NodeID, Dc: n.cfg.DC, State: n.raft.State().String(), LeaderId: string(leader),
		LeaderApiAddr: n.apiAddr(leader), Term: statUint(stats, "term"), AppliedIndex: applied,
		CommitIndex: statUint(stats, "commit_index"), LastLogIndex: n.raft.LastIndex(),
		Ready: n.CaughtUp(), Sessions: uint64(n.fsm.NumSessions()), StateHash: hash,
	}
	for _, m := range members {
		out.Members = append(out.Members, &kvrpb.AdminMember{Id: string(m.ID), RaftAddr: string(m.Address),
			ApiAddr: n.apiAddr(m.ID), Suffrage: suffrage(m.Suffrage), Leader: m.ID == leader})
	}
	return out, nil
}

func statUint(stats map[string]string, key string) uint64 {
	v, _ := strconv.ParseUint(stats[key], 10, 64)
	return v
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	}
	return "staging"
}

func (n *Node) apiAddr(id raft.ServerID) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.apis[id]
}

// Join adds a member; on a follower it relays the call to the leader.
// A member of another DC is refused on every node, and the leader adds
// no member before it has asked the new member itself who it is
// (vetCandidate).
func (s *adminServer) Join(ctx context.Context, req *kvrpb.AdminJoinRequest) (*kvrpb.AdminJoinResponse, error) {
	if req.GetId() == "" || req.GetRaftAddr() == "" || req.GetApiAddr() == "" {
		return nil, status.Error(codes.InvalidArgument, "join: id, raft_addr and api_addr are required")
	}
	if err := s.n.checkJoiner(ctx, req); err != nil {
		return nil, err
	}
	if leader, rctx, err := s.relay(ctx); err != nil || leader != nil {
		if err != nil {
			return nil, err
		}
		return leader.Join(rctx, req)
	}
	if err := s.n.vetCandidate(ctx, req); err != nil {
		return nil, err
	}
	p := Peer{ID: req.GetId(), RaftAddr: req.GetRaftAddr(), APIAddr: req.GetApiAddr()}
	add := s.n.AddVoter
	if req.GetNonvoter() {
		add = s.n.AddNonvoter
	}
	if err := add(p); err != nil {
		return nil, adminStatus(err)
	}
	s.n.log.Info("member joined", "member", p.ID, "raft_addr", p.RaftAddr, "nonvoter", req.GetNonvoter())
	return &kvrpb.AdminJoinResponse{LeaderId: s.n.cfg.NodeID}, nil
}

// Leave removes a member; on a follower it relays the call to the leader.
func (s *adminServer) Leave(ctx context.Context, req *kvrpb.AdminLeaveRequest) (*kvrpb.AdminLeaveResponse, error) {
	if req.GetId() == "" {
		return nil, status.Error(codes.InvalidArgument, "leave: id is required")
	}
	if leader, rctx, err := s.relay(ctx); err != nil || leader != nil {
		if err != nil {
			return nil, err
		}
		return leader.Leave(rctx, req)
	}
	if err := s.n.RemoveServer(req.GetId()); err != nil {
		return nil, adminStatus(err)
	}
	s.n.log.Info("member left", "member", req.GetId())
	return &kvrpb.AdminLeaveResponse{LeaderId: s.n.cfg.NodeID}, nil
}

// relay returns nil on the leader, and otherwise a client of the leader's
// admin service and ctx marked as relayed; a relayed call that reaches a
// follower is refused, never relayed twice. The caller's join token is
// passed on: without TLS the leader cannot tell a member's relay from a
// forged one, so it checks the operator's credential itself.
func (s *adminServer) relay(ctx context.Context) (kvrpb.ClusterAdminClient, context.Context, error) {
	if s.n.IsLeader() {
		return nil, nil, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(forwardedKey)) > 0 {
		return nil, nil, status.Error(codes.Aborted, ErrForwardLoop.Error())
	}
	_, id := s.n.raft.LeaderWithID()
	if id == "" {
		return nil, nil, status.Error(codes.Unavailable, ErrNoLeader.Error())
	}
	cc, err := s.n.conn(id)
	if err != nil {
		return nil, nil, status.Error(codes.Unavailable, err.Error())
	}
	ctx = metadata.AppendToOutgoingContext(ctx, forwardedKey, s.n.cfg.NodeID)
	if token := md.Get(JoinTokenKey); len(token) == 1 {
		ctx = metadata.AppendToOutgoingContext(ctx, JoinTokenKey, token[0])
	}
	return kvrpb.NewClusterAdminClient(cc), ctx, nil
}

// adminStatus maps a membership error to a gRPC status.
func adminStatus(err error) error {
	switch {
	case errors.Is(err, ErrNoLeader):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, ErrIndeterminate):
		return status.Error(codes.Unknown, err.Error())
	case errors.Is(err, ErrDiskFull):
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.Internal, fmt.Sprintf("membership change: %v", err))
}

// LeaderEpoch counts the times this node became a ready leader. A writer
// that caches state derived from its own proposals (the leader's KV-event
// cursors) drops it when the epoch changes: proposals of an earlier term
// may have been lost.
func (n *Node) LeaderEpoch() uint64 { return n.epoch.Load() }

// SyncPeerAPIs keeps the node's directory of members' cluster API
// addresses complete until ctx ends: every interval it asks each member
// whose address it knows for its view and records the addresses it did
// not know. Static peers know each other from their configuration; a
// member added by Join is known at first only to the leader that added
// it (and knows the members it asked while joining), so without this a
// follower could not forward writes once the new member leads.
func (n *Node) SyncPeerAPIs(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		members, err := n.Members()
		if err != nil {
			continue
		}
		n.pruneAPIs(members)
		for _, m := range members {
			if m.ID == raft.ServerID(n.cfg.NodeID) || n.apiAddr(m.ID) == "" {
				continue
			}
			n.learnAPIs(ctx, m.ID)
		}
	}
}

// learnAPIs records the API addresses member id knows.
func (n *Node) learnAPIs(ctx context.Context, id raft.ServerID) {
	cc, err := n.conn(id)
	if err != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.HeartbeatTimeout)
	defer cancel()
	st, err := kvrpb.NewClusterAdminClient(cc).Status(cctx, &kvrpb.AdminStatusRequest{})
	if err != nil {
		return
	}
	for _, m := range st.GetMembers() {
		if m.GetApiAddr() != "" && n.apiAddr(raft.ServerID(m.GetId())) == "" {
			n.SetPeerAPI(m.GetId(), m.GetApiAddr())
			n.log.Info("learnt a member's cluster API address", "member", m.GetId(), "api_addr", m.GetApiAddr())
		}
	}
}

// pruneAPIs forgets the addresses of servers that are no longer members,
// once this node is one (a node still joining knows the members it asked
// and is in no configuration yet): a member that left and rejoins on a
// new address is then learnt anew.
func (n *Node) pruneAPIs(members []raft.Server) {
	in := make(map[raft.ServerID]bool, len(members))
	for _, m := range members {
		in[m.ID] = true
	}
	if !in[raft.ServerID(n.cfg.NodeID)] {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	maps.DeleteFunc(n.apis, func(id raft.ServerID, _ string) bool { return !in[id] })
}
