package consensus

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
)

// Peer is one member of the cluster: its raft server id, raft address and
// the gRPC address on which it serves leader forwarding.
type Peer struct {
	ID       string
	RaftAddr string
	APIAddr  string
}

// Config configures a Node. Zero durations and sizes take the defaults of
// EnsureDefaults; Validate names the offending key (the config file's
// snake_case name) in its error.
type Config struct {
	// NodeID is this node's raft server id (node_id); required.
	NodeID string
	// DC is the datacenter this cluster serves (dc); bindings record it.
	DC string
	// RaftAddr is the raft bind address (raft_addr), used to build a TCP
	// transport when Deps.Transport is nil.
	RaftAddr string
	// APIAddr is this node's forwarding gRPC address (api_addr).
	APIAddr string
	// DataDir holds raft snapshots (data_dir); empty keeps everything in
	// memory. A persistent node must also be given Deps.LogStore and
	// Deps.StableStore.
	DataDir string
	// Peers are the static members: bootstrap set and the map from server
	// id to forwarding address (peers).
	Peers []Peer
	// Bootstrap makes Start bootstrap a new cluster from Peers when the
	// stores hold no state (bootstrap).
	Bootstrap bool

	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout default to
	// DefaultHeartbeatTimeout, DefaultElectionTimeout and
	// DefaultLeaderLeaseTimeout (500 ms each): half of raft's LAN values
	// for the first two, since a raft group is DC-local.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout (commit_timeout, default DefaultCommitTimeout) is how
	// long the leader's replication to a follower idles before it sends
	// an empty append carrying the commit index.
	CommitTimeout time.Duration
	// ApplyTimeout bounds one write (apply_timeout, default 5 s): past it
	// the write is indeterminate, and callers retry with the request id.
	ApplyTimeout time.Duration
	// BarrierTimeout bounds each attempt of the new leader's barrier
	// (barrier_timeout, default 10 s); it is retried while the node leads.
	BarrierTimeout time.Duration
	// MaxCommandBytes bounds an encoded command (max_command_bytes,
	// default 512 KiB): large entries stall replication of everything
	// behind them, and KV events are batched to stay below it.
	MaxCommandBytes int
	// ExpiryInterval is how often the leader looks for expired bindings
	// (expiry_interval, default 1 s).
	ExpiryInterval time.Duration
	// SnapshotThreshold and TrailingLogs default to raft's 8192 and 10240.
	SnapshotThreshold uint64
	TrailingLogs      uint64

	// Now is the clock the leader stamps into entries; default time.Now.
	// It is the only clock the package reads, so tests inject their own.
	Now func() time.Time
	// Logger receives structured logs with keys node, index, term.
	Logger *slog.Logger
	// DialOptions are used to reach the leader's forwarding service; the
	// default is no transport security, for a DC-local cluster network.
	DialOptions []grpc.DialOption
	// Auth says who may call the cluster API (see authz.go).
	Auth Auth
}

// Defaults.
const (
	// DefaultHeartbeatTimeout is 500 ms, not raft's 1 s. A follower checks
	// for a silent leader on a timer of random period between one and two
	// heartbeat timeouts, so it notices a lost leader between one and
	// three heartbeat timeouts after the last contact, and a three-member
	// group elects once both survivors noticed (a voter that still hears
	// its leader refuses votes). At 1 s that detection alone made the
	// unavailability of a leader loss 2-3 s (chaos S01-S04, p99 target 3
	// s); at 500 ms it is 0.5-1.5 s. The leader heartbeats every tenth of
	// it (50 ms), so a follower calls an election only after ten missed
	// heartbeats; S04 (five members, flapping partitions, a loaded 2-core
	// host) measures the elections per minute this costs.
	DefaultHeartbeatTimeout = 500 * time.Millisecond
	// DefaultElectionTimeout is 500 ms: how long a candidate waits for
	// votes (randomised to up to twice it) before it tries again, after a
	// split vote or a refused pre-vote.
	DefaultElectionTimeout = 500 * time.Millisecond
	// DefaultLeaderLeaseTimeout is raft's 500 ms: a leader that heard from
	// no quorum for that long steps down. It may not exceed the heartbeat
	// timeout.
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond

	DefaultApplyTimeout    = 5 * time.Second
	DefaultBarrierTimeout  = 10 * time.Second
	DefaultMaxCommandBytes = 512 << 10
	DefaultExpiryInterval  = time.Second
	// DefaultCommitTimeout is 5 ms, not raft's 50 ms. A follower learns
	// that an entry committed only from the leader's next append; while
	// entries stream that is the next entry, but the last entry of a
	// burst waits for the idle append, sent after a random 1-2 times
	// CommitTimeout. At 50 ms every burst's tail became visible on the
	// followers 50-100 ms after the leader, over the 50 ms budget for a
	// KV event to reach every node's index. At 5 ms the tail waits 5-10
	// ms, for at most 200 empty appends per second per idle follower on
	// a DC-local network.
	DefaultCommitTimeout = 5 * time.Millisecond
)

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	d := raft.DefaultConfig()
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	c.ElectionTimeout = cmp.Or(c.ElectionTimeout, DefaultElectionTimeout)
	c.LeaderLeaseTimeout = cmp.Or(c.LeaderLeaseTimeout, min(DefaultLeaderLeaseTimeout, c.HeartbeatTimeout))
	c.CommitTimeout = cmp.Or(c.CommitTimeout, DefaultCommitTimeout)
	c.ApplyTimeout = cmp.Or(c.ApplyTimeout, DefaultApplyTimeout)
	c.BarrierTimeout = cmp.Or(c.BarrierTimeout, DefaultBarrierTimeout)
	c.ExpiryInterval = cmp.Or(c.ExpiryInterval, DefaultExpiryInterval)
	c.MaxCommandBytes = cmp.Or(c.MaxCommandBytes, DefaultMaxCommandBytes)
	c.SnapshotThreshold = cmp.Or(c.SnapshotThreshold, d.SnapshotThreshold)
	c.TrailingLogs = cmp.Or(c.TrailingLogs, d.TrailingLogs)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
}

// Validate checks the config after EnsureDefaults.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == "":
		return configError("node_id: required")
	case c.HeartbeatTimeout < 5*time.Millisecond || c.ElectionTimeout < 5*time.Millisecond:
		return configError("heartbeat_timeout, election_timeout: must be >= 5ms")
	case c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return configError("leader_lease_timeout: %v over heartbeat_timeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	case c.ApplyTimeout <= 0 || c.BarrierTimeout <= 0 || c.ExpiryInterval <= 0:
		return configError("apply_timeout, barrier_timeout, expiry_interval: must be > 0")
	case c.MaxCommandBytes < 1<<10:
		return configError("max_command_bytes: %d below 1 KiB", c.MaxCommandBytes)
	case c.Bootstrap && len(c.Peers) == 0:
		return configError("peers: bootstrap needs at least this node")
	}
	return c.validatePeers()
}

// validatePeers checks that peers are unique and complete.
func (c *Config) validatePeers() error {
	seen := map[string]bool{}
	self := false
	for i, p := range c.Peers {
		if p.ID == "" || p.RaftAddr == "" {
			return configError("peers[%d]: id and raft_addr required", i)
		}
		if seen[p.ID] {
			return configError("peers[%d]: duplicate id %q", i, p.ID)
		}
		seen[p.ID] = true
		self = self || p.ID == c.NodeID
	}
	if c.Bootstrap && !self {
		return configError("peers: bootstrap set does not include node_id %q", c.NodeID)
	}
	return nil
}

// configError wraps ErrInvalidConfig with the key and the reason.
func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// raftConfig builds raft's config.
func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	// BatchApplyCh lets the leader append many concurrent applies in one
	// log write; the cost is that Apply's timeout is not exact.
	rc.BatchApplyCh = true
	rc.Logger = newHclogAdapter(c.Logger, c.NodeID)
	return rc
}
