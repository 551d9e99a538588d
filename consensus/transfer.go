package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// ErrNoTransferTarget is returned by TransferLeadership when no other
// voter could take over: a one-member cluster, or every other voter down
// until the context ended.
var ErrNoTransferTarget = errors.New("consensus: no voter to transfer leadership to")

// transferRetry spaces the attempts of TransferLeadership: one attempt
// lasts up to an election timeout, and a voter that was catching up may be
// ready for the next.
const transferRetry = 200 * time.Millisecond

// transferAttempts bounds the attempts: when three in a row failed, the
// other voters are down or cut off (the last member of a cluster being
// stopped), and waiting longer only delays the stop.
const transferAttempts = 3

// TransferLeadership hands the leadership to another voter when this node
// leads, and returns once another node has won the election (its id, when
// this node has heard of it yet) or ctx ends. A node that does not lead
// returns at once with no error. A draining node calls it before raft
// shuts down, so that the cluster does not wait an election timeout for a
// leader it could have had at once, and writes in flight find the new
// leader by forwarding.
func (n *Node) TransferLeadership(ctx context.Context) (string, error) {
	var last error
	for attempt := 0; n.IsLeader(); attempt++ {
		servers, err := n.Members()
		if err != nil {
			return "", err
		}
		if !hasOtherVoter(servers, n.cfg.NodeID) {
			return "", ErrNoTransferTarget
		}
		if last = n.raft.LeadershipTransfer().Error(); last == nil {
			break
		}
		if attempt+1 == transferAttempts {
			return "", fmt.Errorf("%w: %d attempts: %w", ErrNoTransferTarget, transferAttempts, last)
		}
		n.log.Warn("leadership transfer failed; retrying", "attempt", attempt, "err", last)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: %w", ErrNoTransferTarget, errors.Join(ctx.Err(), last))
		case <-time.After(transferRetry):
		}
	}
	_, id := n.raft.LeaderWithID()
	if string(id) == n.cfg.NodeID {
		id = ""
	}
	return string(id), nil
}

// hasOtherVoter reports whether servers hold a voter other than self.
func hasOtherVoter(servers []raft.Server, self string) bool {
	return slices.ContainsFunc(servers, func(s raft.Server) bool { return s.Suffrage == raft.Voter && string(s.ID) != self })
}
