package consensus

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// bootstrap starts a new cluster from the static peers. A node whose
// stores already hold state skips it (raft.ErrCantBootstrap), so every
// node of a static cluster may be configured to bootstrap.
func (n *Node) bootstrap() error {
	var cfg raft.Configuration
	for _, p := range n.cfg.Peers {
		cfg.Servers = append(cfg.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr),
		})
	}
	err := n.raft.BootstrapCluster(cfg).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("consensus: bootstrapping: %w", err)
	}
	return nil
}

// AddVoter adds a voting member; it must run on the leader. The peer's
// forwarding address is recorded on this node.
func (n *Node) AddVoter(p Peer) error { return n.addMember(p, "adding voter", n.raft.AddVoter) }

// AddNonvoter adds a member that replicates the log without voting (a
// read replica, or a voter-to-be catching up); it must run on the leader.
func (n *Node) AddNonvoter(p Peer) error {
	return n.addMember(p, "adding nonvoter", n.raft.AddNonvoter)
}

// addMember records p's forwarding address and adds it with add.
func (n *Node) addMember(p Peer, op string, add func(raft.ServerID, raft.ServerAddress, uint64, time.Duration) raft.IndexFuture) error {
	n.SetPeerAPI(p.ID, p.APIAddr)
	err := add(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, n.cfg.ApplyTimeout).Error()
	return membershipError(op, p.ID, err)
}

// RemoveServer removes a member; it must run on the leader. Its
// forwarding address is forgotten, so that a member that rejoins on
// another address is listed with its new one.
func (n *Node) RemoveServer(id string) error {
	err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error()
	if err == nil {
		n.forgetPeerAPI(raft.ServerID(id))
	}
	return membershipError("removing server", id, err)
}

// forgetPeerAPI drops a former member's forwarding address.
func (n *Node) forgetPeerAPI(id raft.ServerID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.apis, id)
}

// MemberAt names the member of the configuration at raft address addr;
// empty when none is.
func (n *Node) MemberAt(addr raft.ServerAddress) string {
	members, err := n.Members()
	if i := slices.IndexFunc(members, func(m raft.Server) bool { return m.Address == addr }); err == nil && i >= 0 {
		return string(members[i].ID)
	}
	return ""
}

// Members returns the current configuration's servers.
func (n *Node) Members() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("consensus: reading configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

// membershipError classifies a membership change's error: on a follower
// it is ErrNoLeader-class (nothing proposed), otherwise indeterminate.
func membershipError(op, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: %s %s: %w", ErrNoLeader, op, id, err)
	}
	return fmt.Errorf("%w: %s %s: %w", ErrIndeterminate, op, id, err)
}
