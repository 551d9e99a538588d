package consensus

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// vetTimeout bounds the leader's status call to a joining member.
const vetTimeout = 5 * time.Second

// refuseJoin counts and returns a refused join.
func (n *Node) refuseJoin(reason, format string, args ...any) error {
	n.sec.Refused(linkJoin, reason)
	msg := fmt.Sprintf(format, args...)
	n.log.Warn("join refused", "reason", reason, "detail", msg)
	return status.Error(codes.PermissionDenied, fmt.Sprintf("%v: %s", ErrUnauthorized, msg))
}

// checkJoiner refuses, on any node, a join that names another DC, and a
// member certificate that asks to add a member other than itself.
func (n *Node) checkJoiner(ctx context.Context, req *kvrpb.AdminJoinRequest) error {
	if dc := req.GetDc(); dc != "" && dc != n.cfg.DC {
		return n.refuseJoin(mtls.ReasonWrongDC, "%s serves dc %s, this cluster dc %s", req.GetId(), dc, n.cfg.DC)
	}
	if !n.cfg.Auth.TLS || forwarder(ctx) != "" {
		return nil
	}
	if id, ok := mtls.PeerIdentity(ctx); ok && id.Role == mtls.RoleMember && id.Name != req.GetId() {
		return n.refuseJoin(mtls.ReasonWrongName, "%s asks to add %s", id, req.GetId())
	}
	return nil
}

// vetCandidate asks the joining member, at its cluster API address, who
// it is before the leader adds it: its node id must be the one requested
// and its DC this cluster's; over TLS its certificate must name it as a
// member of the DC (the dial options verify the DC and role). So a node
// of another DC cannot join even through an operator's request that does
// not name a DC, nor can one member's certificate add another address.
func (n *Node) vetCandidate(ctx context.Context, req *kvrpb.AdminJoinRequest) error {
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, n.cfg.DialOptions...)
	cc, err := grpc.NewClient(req.GetApiAddr(), opts...)
	if err != nil {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("join: api_addr %s: %v", req.GetApiAddr(), err))
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, vetTimeout)
	defer cancel()
	var p peer.Peer
	st, err := kvrpb.NewClusterAdminClient(cc).Status(cctx, &kvrpb.AdminStatusRequest{}, grpc.Peer(&p))
	if err != nil {
		return status.Error(codes.Unavailable, fmt.Sprintf("join: asking %s at %s who it is: %v", req.GetId(), req.GetApiAddr(), err))
	}
	if st.GetDc() != n.cfg.DC {
		return n.refuseJoin(mtls.ReasonWrongDC, "%s at %s serves dc %s, this cluster dc %s", st.GetNodeId(), req.GetApiAddr(), st.GetDc(), n.cfg.DC)
	}
	if st.GetNodeId() != req.GetId() {
		return n.refuseJoin(mtls.ReasonWrongName, "%s answers as %s", req.GetApiAddr(), st.GetNodeId())
	}
	if n.cfg.Auth.TLS {
		ctx := peer.NewContext(context.Background(), &p)
		if id, ok := mtls.PeerIdentity(ctx); !ok || id.Name != req.GetId() {
			return n.refuseJoin(mtls.ReasonWrongName, "%s's certificate names %v", req.GetId(), id)
		}
	}
	return nil
}
