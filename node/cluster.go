package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/store"
)

// ClusterConfig makes the node a member of its DC's raft cluster. It is
// off while RaftAddr is empty: the node then keeps bindings in memory and
// applies KV events itself.
type ClusterConfig struct {
	// RaftAddr is the raft transport's listen address (raft_addr).
	RaftAddr string
	// APIAddr is the cluster API (gRPC: write forwarding and
	// ClusterAdmin) listen address (cluster_api_addr).
	APIAddr string
	// DataDir holds the raft log, the FSM tables and raft snapshots
	// (data_dir). Empty keeps them in memory: a restart starts empty, so
	// only tests and the demo leave it unset.
	DataDir string
	// Peers are the static members, "id=raft_addr/api_addr" each (peers);
	// they must include this node to bootstrap.
	Peers []string
	// Bootstrap starts a new cluster from Peers when the stores are empty
	// (bootstrap); every member of a static cluster may set it.
	Bootstrap bool
	// Join is a member's cluster API address (join): a node with empty
	// stores asks it to be added as a voter.
	Join string
	// TLSCert, TLSKey and TLSCA (cluster_tls_cert, cluster_tls_key,
	// cluster_tls_ca) turn on mutual TLS for raft's transport and the
	// cluster API; all three or none. Without them both are plaintext,
	// for a trusted DC-local network (loopback, or with --insecure). Each
	// certificate names its holder as kvr://<dc>/member/<node_id> (see
	// internal/mtls).
	TLSCert, TLSKey, TLSCA string
	// JoinTokenFile (cluster_join_token_file) holds the operator
	// credential of membership changes: members accept a join or leave
	// that carries it, and a node started with join presents it. Without
	// it (and without TLS) only loopback callers may change membership.
	JoinTokenFile string
	// Recovery says what the member does with corrupt local state
	// (cluster_rebuild.go).
	Recovery RecoveryConfig
	// HeartbeatTimeout and ElectionTimeout are raft's (default 500 ms
	// each, consensus.DefaultHeartbeatTimeout).
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
}

// Enabled reports whether the node runs as a cluster member.
func (c *ClusterConfig) Enabled() bool { return c.RaftAddr != "" }

// validate checks the cluster options; errors name the key.
func (c *ClusterConfig) validate(nodeID string) error {
	if !c.Enabled() {
		if c.APIAddr != "" || len(c.Peers) > 0 || c.Bootstrap || c.Join != "" || c.DataDir != "" {
			return fmt.Errorf("%w: raft_addr: required by cluster_api_addr, peers, bootstrap, join and data_dir", ErrConfig)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		return fmt.Errorf("%w: raft_addr %q: %v", ErrConfig, c.RaftAddr, err)
	}
	if _, _, err := net.SplitHostPort(c.APIAddr); err != nil {
		return fmt.Errorf("%w: cluster_api_addr %q: %v", ErrConfig, c.APIAddr, err)
	}
	peers, err := c.peers()
	if err != nil {
		return err
	}
	if c.tlsEnabled() && (c.TLSCert == "" || c.TLSKey == "" || c.TLSCA == "") {
		return fmt.Errorf("%w: cluster_tls_cert, cluster_tls_key, cluster_tls_ca: set all three or none", ErrConfig)
	}
	if c.Bootstrap && c.Join != "" {
		return fmt.Errorf("%w: bootstrap and join: choose one", ErrConfig)
	}
	if !c.Bootstrap && c.Join == "" && len(peers) == 0 {
		return fmt.Errorf("%w: peers: a cluster member needs peers with bootstrap, or join", ErrConfig)
	}
	if c.Bootstrap && !containsPeer(peers, nodeID) {
		return fmt.Errorf("%w: peers: bootstrap needs this node (%s) among the peers", ErrConfig, nodeID)
	}
	return nil
}

func containsPeer(peers []consensus.Peer, id string) bool {
	for _, p := range peers {
		if p.ID == id {
			return true
		}
	}
	return false
}

// peers parses Peers.
func (c *ClusterConfig) peers() ([]consensus.Peer, error) {
	out := make([]consensus.Peer, 0, len(c.Peers))
	for _, s := range c.Peers {
		id, addrs, ok := strings.Cut(s, "=")
		raftAddr, apiAddr, ok2 := strings.Cut(addrs, "/")
		if !ok || !ok2 || id == "" {
			return nil, fmt.Errorf("%w: peers: %q is not id=raft_addr/api_addr", ErrConfig, s)
		}
		for _, a := range []string{raftAddr, apiAddr} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("%w: peers: %q: %v", ErrConfig, s, err)
			}
		}
		out = append(out, consensus.Peer{ID: id, RaftAddr: raftAddr, APIAddr: apiAddr})
	}
	return out, nil
}

// cluster is a running cluster membership: the stores, the raft node, the
// replicated session store, the KV-event batcher and the cluster API
// server.
type cluster struct {
	log      *slog.Logger
	cn       *consensus.Node
	sessions *consensus.Sessions
	batcher  *consensus.Batcher
	idx      *index.Exact
	srv      *grpc.Server
	logs     *store.LogStore
	fsm      *store.FSMStore
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// trans is a TLS raft transport this cluster built (consensus closes
	// only transports it built itself), and creds the cluster API's
	// client credentials.
	trans *raft.NetworkTransport
	creds credentials.TransportCredentials
	// joinToken is presented by join.
	joinToken string
	// rebuildConns are the clients a rebuilt member rejoins through.
	rebuildConns []*grpc.ClientConn
}

// peerSyncInterval is how often a member refreshes its directory of the
// other members' cluster API addresses (see consensus.Node.SyncPeerAPIs).
const peerSyncInterval = 2 * time.Second

// startCluster opens the stores, starts raft and the cluster API, and
// joins the cluster when configured to.
func (n *Node) startCluster(ctx context.Context) (_ *cluster, err error) {
	cc := n.cfg.Cluster
	peers, err := cc.peers()
	if err != nil {
		return nil, err
	}
	c := &cluster{log: n.log, idx: index.NewExact()}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	deps := consensus.Deps{Index: c.idx, Metrics: n.metrics}
	rebuilt := false
	if cc.DataDir != "" {
		// The stores report a full disk and corruption to the storage
		// metrics; a corrupt FSM store is set aside and rebuilt.
		// A corrupt raft log sets the whole member aside (rebuilt).
		var l localState
		if l, rebuilt, err = n.openLocal(&cc); err != nil {
			return nil, fmt.Errorf("data_dir: %w", err)
		}
		c.logs, c.fsm = l.logs, l.fsm
		deps.LogStore, deps.StableStore, deps.State, deps.Snapshots = l.logs, l.logs, l.st, l.snaps
	}
	creds := insecure.NewCredentials()
	var srvOpts []grpc.ServerOption
	auth := consensus.Auth{TLS: cc.tlsEnabled()}
	if auth.JoinToken, err = ReadJoinToken(cc.JoinTokenFile); err != nil {
		return nil, err
	}
	c.joinToken = auth.JoinToken
	var cnRef atomic.Pointer[consensus.Node]
	if cc.tlsEnabled() {
		links, err := loadClusterLinks(&cc, n.cfg.DC, n.cfg.NodeID, n.metrics.Sec(), n.log)
		if err != nil {
			return nil, err
		}
		memberAt := func(a raft.ServerAddress) string {
			if cn := cnRef.Load(); cn != nil {
				return cn.MemberAt(a)
			}
			return ""
		}
		if c.trans, err = consensus.NewTLSTransport(cc.RaftAddr, links.raftServer, links.raftClient, memberAt, 3, consensus.DefaultApplyTimeout, n.log, n.cfg.NodeID); err != nil {
			return nil, fmt.Errorf("raft_addr: %w", err)
		}
		deps.Transport = c.trans
		creds = credentials.NewTLS(links.apiClient)
		srvOpts = append(srvOpts, grpc.Creds(credentials.NewTLS(links.apiServer)))
	}
	c.creds = creds
	var rejoiner consensus.Rejoiner
	if rebuilt {
		// The old entry goes before raft runs on the empty stores, and the
		// member must not bootstrap a configuration of its own.
		if rejoiner, err = c.rebuilder(n); err != nil {
			return nil, err
		}
		if err := rejoiner.Forget(ctx); err != nil {
			return nil, err
		}
		cc.Bootstrap = false
	}
	ln, err := net.Listen("tcp", cc.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster_api_addr %s: %w", cc.APIAddr, err)
	}
	c.cn, err = consensus.New(consensus.Config{
		NodeID: n.cfg.NodeID, DC: n.cfg.DC, RaftAddr: cc.RaftAddr, APIAddr: cc.APIAddr,
		DataDir: cc.DataDir, Peers: peers, Bootstrap: cc.Bootstrap,
		HeartbeatTimeout: cc.HeartbeatTimeout, ElectionTimeout: cc.ElectionTimeout,
		LeaderLeaseTimeout: min(cc.HeartbeatTimeout, 500*time.Millisecond),
		Logger:             n.log,
		DialOptions:        []grpc.DialOption{grpc.WithTransportCredentials(creds)},
		Auth:               auth,
	}, deps)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	cnRef.Store(c.cn)
	if err := n.metrics.Registry.Register(metrics.NewRaftCollector(c.cn.Raft())); err != nil {
		n.log.Warn("raft metrics not registered", "err", err)
	}
	c.srv = grpc.NewServer(append(srvOpts, c.cn.ServerOptions()...)...)
	c.cn.RegisterForwarding(c.srv)
	c.cn.RegisterAdmin(c.srv)
	c.cn.RegisterBackup(c.srv)
	c.cn.RegisterOwnership(c.srv)
	go func() { _ = c.srv.Serve(ln) }()

	d := n.cfg.Dispatch
	if d.AffinityTTL > 0 {
		c.sessions, err = consensus.NewSessions(c.cn, consensus.SessionsConfig{TTL: d.AffinityTTL, MaxSessions: d.MaxSessions})
		if err != nil {
			return nil, err
		}
	}
	c.batcher = consensus.NewBatcher(c.cn, consensus.BatcherConfig{})
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.wg.Go(func() { c.batcher.Run(bctx) })
	c.wg.Go(func() { c.cn.SyncPeerAPIs(bctx, peerSyncInterval) })
	if rebuilt {
		c.wg.Go(func() { c.rejoin(bctx, rejoiner, cc.DataDir) })
	} else if cc.Join != "" {
		req := &kvrpb.AdminJoinRequest{Id: n.cfg.NodeID, RaftAddr: cc.RaftAddr, ApiAddr: cc.APIAddr, Dc: n.cfg.DC}
		if err := c.join(ctx, cc.Join, req); err != nil {
			return nil, err
		}
	}
	n.log.Info("cluster member started", "raft_addr", cc.RaftAddr, "api_addr", ln.Addr().String(),
		"data_dir", cc.DataDir, "peers", len(peers))
	return c, nil
}

// join asks the member at addr to add this node, retrying until it is in
// the configuration or ctx ends. A node that is already a member (a
// restart) finds itself in the first answer and does nothing.
func (c *cluster) join(ctx context.Context, addr string, req *kvrpb.AdminJoinRequest) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(c.creds))
	if err != nil {
		return fmt.Errorf("join %s: %w", addr, err)
	}
	defer conn.Close()
	admin := kvrpb.NewClusterAdminClient(conn)
	id := req.GetId()
	if c.joinToken != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, consensus.JoinTokenKey, c.joinToken)
	}
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := admin.Status(cctx, &kvrpb.AdminStatusRequest{})
		if err == nil {
			for _, m := range st.GetMembers() {
				if m.GetId() == id {
					cancel()
					return nil
				}
				if m.GetApiAddr() != "" {
					c.cn.SetPeerAPI(m.GetId(), m.GetApiAddr())
				}
			}
			_, err = admin.Join(cctx, req)
		}
		cancel()
		if err == nil {
			c.log.Info("joined cluster", "via", addr)
			return nil
		}
		if status.Code(err) == codes.PermissionDenied {
			// A refusal will not change by retrying: say so and stop.
			return fmt.Errorf("join %s: %w", addr, err)
		}
		c.log.Warn("join failed; retrying", "via", addr, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("join %s: %w", addr, errors.Join(ctx.Err(), err))
		case <-time.After(time.Second):
		}
	}
}

// close stops everything startCluster started, in reverse order.
func (c *cluster) close() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	if c.sessions != nil {
		_ = c.sessions.Close()
	}
	if c.srv != nil {
		c.srv.Stop()
	}
	for _, conn := range c.rebuildConns {
		_ = conn.Close()
	}
	if c.cn != nil {
		if err := c.cn.Shutdown(); err != nil {
			c.log.Warn("raft shutdown", "err", err)
		}
	}
	if c.trans != nil {
		c.trans.CloseStreams()
		_ = c.trans.Close()
	}
	if c.fsm != nil {
		if err := c.fsm.Close(); err != nil {
			c.log.Warn("closing the fsm store", "err", err)
		}
	}
	if c.logs != nil {
		if err := c.logs.Close(); err != nil {
			c.log.Warn("closing the raft log store", "err", err)
		}
	}
}
