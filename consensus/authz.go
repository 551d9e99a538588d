package consensus

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// Auth says who may call a node's cluster API. The rules, one per method
// (authorize), are:
//
//   - RaftForward.Apply: only a current member forwarding its own
//     proposal. The call must carry the forwarding mark naming the
//     member; over TLS the caller's certificate must name that member
//     (kvr://<dc>/member/<id>), without TLS the caller's address must be
//     the member's raft host when that is an IP. No client, operator or
//     relay may propose.
//   - ClusterAdmin.Join and Leave: an operator credential: an operator
//     certificate of the DC, or the join token, or a member relaying a
//     call it accepted (authenticated by its member certificate; without
//     TLS the relay passes the caller's token on). With neither TLS nor
//     a token configured, only loopback callers may change membership.
//   - ClusterBackup.Backup and Restore: the same operator credential, since
//     a backup holds every session binding and a restore replaces them.
//   - ClusterAdmin.Status and Ownership.Watch: any identity the TLS
//     layer let in (members, relays and operators of the DC), or anyone
//     on a plaintext cluster network.
//   - Anything else is refused.
type Auth struct {
	// TLS is set when the cluster API runs over mutual TLS with identity
	// certificates: the rules then read the caller's identity.
	TLS bool
	// JoinToken (cluster_join_token_file) is the operator credential for
	// membership changes without an operator certificate; empty accepts
	// none.
	JoinToken string
}

// Metadata keys of the cluster API's credentials.
const (
	// JoinTokenKey carries the join token of a membership change.
	JoinTokenKey = "x-kvr-join-token"
)

// Refusal links, the link label of the refusal counter.
const (
	linkForward = "raft_forward"
	linkJoin    = "cluster_join"
	linkLeave   = "cluster_leave"
	linkBackup  = "cluster_backup"
	linkRestore = "cluster_restore"
	linkAPI     = "cluster_api"
)

// Refusal reasons beyond mtls's.
const (
	reasonNotMember     = "not_member"
	reasonNoCredential  = "no_credential"
	reasonBadCredential = "bad_credential"
)

// ServerOptions are the interceptors that enforce Auth on the gRPC server
// carrying RegisterForwarding, RegisterAdmin and RegisterOwnership.
func (n *Node) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := n.authorize(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := n.authorize(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// authorize applies the rule of method; a refusal is counted, logged at
// debug (an attacker must not be able to flood the log) and returned as
// PermissionDenied.
func (n *Node) authorize(ctx context.Context, method string) error {
	link, reason, msg := n.rule(ctx, method)
	if reason == "" {
		return nil
	}
	n.sec.Refused(link, reason)
	n.log.Debug("cluster API call refused", "method", method, "reason", reason, "detail", msg, "peer", peerAddr(ctx))
	return status.Error(codes.PermissionDenied, fmt.Sprintf("%v: %s", ErrUnauthorized, msg))
}

// operatorLinks are the methods that need an operator credential, by the
// link their refusals are counted under.
var operatorLinks = map[string]string{
	kvrpb.ClusterAdmin_Join_FullMethodName:     linkJoin,
	kvrpb.ClusterAdmin_Leave_FullMethodName:    linkLeave,
	kvrpb.ClusterBackup_Backup_FullMethodName:  linkBackup,
	kvrpb.ClusterBackup_Restore_FullMethodName: linkRestore,
}

// rule returns the refusal's link, reason and message, or an empty reason.
func (n *Node) rule(ctx context.Context, method string) (link, reason, msg string) {
	if link, ok := operatorLinks[method]; ok {
		reason, msg = n.checkOperator(ctx)
		return link, reason, msg
	}
	switch method {
	case kvrpb.RaftForward_Apply_FullMethodName:
		reason, msg = n.checkForward(ctx)
		return linkForward, reason, msg
	case kvrpb.ClusterAdmin_Status_FullMethodName, kvrpb.Ownership_Watch_FullMethodName:
		return linkAPI, "", ""
	}
	return linkAPI, mtls.ReasonWrongRole, "no rule for " + method
}

// forwarder is the member id a call's forwarding mark names, if any.
func forwarder(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(forwardedKey); len(v) == 1 {
		return v[0]
	}
	return ""
}

// checkForward is RaftForward.Apply's rule.
func (n *Node) checkForward(ctx context.Context) (reason, msg string) {
	from := forwarder(ctx)
	if from == "" {
		return reasonNotMember, "only members forward proposals; this call is not a member's forwarding"
	}
	return n.checkMember(ctx, from)
}

// checkMember checks that the caller is member from, of the current
// configuration.
func (n *Node) checkMember(ctx context.Context, from string) (reason, msg string) {
	addr, ok := n.memberAddr(from)
	if !ok {
		return reasonNotMember, from + " is not a member"
	}
	if n.cfg.Auth.TLS {
		id, ok := mtls.PeerIdentity(ctx)
		switch {
		case !ok:
			return mtls.ReasonNoIdentity, "no member certificate"
		case id.Role != mtls.RoleMember:
			return mtls.ReasonWrongRole, id.String() + " is not a member's certificate"
		case id.DC != n.cfg.DC:
			return mtls.ReasonWrongDC, id.String() + " is of another dc"
		case id.Name != from:
			return mtls.ReasonWrongName, id.String() + " forwards as " + from
		}
		return "", ""
	}
	if !sameHost(ctx, addr) {
		return mtls.ReasonWrongName, "call from " + peerAddr(ctx) + " claims member " + from + " at " + addr
	}
	return "", ""
}

// memberAddr is the raft address of member id in the configuration.
func (n *Node) memberAddr(id string) (string, bool) {
	members, err := n.Members()
	if i := slices.IndexFunc(members, func(m raft.Server) bool { return m.ID == raft.ServerID(id) }); err == nil && i >= 0 {
		return string(members[i].Address), true
	}
	return "", false
}

// checkOperator is the rule of membership changes.
func (n *Node) checkOperator(ctx context.Context) (reason, msg string) {
	if id, ok := mtls.PeerIdentity(ctx); ok && n.cfg.Auth.TLS {
		if id.Role == mtls.RoleOperator && id.DC == n.cfg.DC {
			return "", ""
		}
		if from := forwarder(ctx); from != "" && id.Role == mtls.RoleMember {
			return n.checkMember(ctx, from) // a member relays a call it accepted
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	tokens := md.Get(JoinTokenKey)
	switch {
	case len(tokens) == 1 && n.cfg.Auth.JoinToken != "":
		if subtle.ConstantTimeCompare([]byte(tokens[0]), []byte(n.cfg.Auth.JoinToken)) == 1 {
			return "", ""
		}
		return reasonBadCredential, "wrong join token"
	case n.cfg.Auth.JoinToken == "" && !n.cfg.Auth.TLS && loopbackPeer(ctx):
		return "", "" // a loopback-only development cluster
	}
	return reasonNoCredential, "membership changes need an operator certificate or the join token"
}

// peerAddr is the caller's address, for logs.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// peerIP is the caller's IP.
func peerIP(ctx context.Context) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(peerAddr(ctx))
	return ap.Addr().Unmap(), err == nil
}

// loopbackPeer reports whether the caller is on this machine's loopback.
func loopbackPeer(ctx context.Context) bool {
	ip, ok := peerIP(ctx)
	return ok && ip.IsLoopback()
}

// sameHost reports whether the caller's IP is raftAddr's host; a host
// name (which this node does not resolve per call) passes.
func sameHost(ctx context.Context, raftAddr string) bool {
	host, _, err := net.SplitHostPort(raftAddr)
	if err != nil {
		host = raftAddr
	}
	want, err := netip.ParseAddr(host)
	if err != nil || want.IsUnspecified() {
		return true
	}
	got, ok := peerIP(ctx)
	return ok && (got == want.Unmap() || got.IsLoopback() && want.IsLoopback())
}
