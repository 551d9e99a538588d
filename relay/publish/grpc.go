package publish

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Keepalive settings of the WAN link. A stalled subscriber connection is
// found by keepalive within KeepaliveTime + KeepaliveTimeout and its stream
// ended, which also releases its feed.
const (
	// KeepaliveTime is the idle time before a ping: 20 s keeps NAT and load
	// balancer state alive across WAN middleboxes.
	KeepaliveTime = 20 * time.Second
	// KeepaliveTimeout is how long a ping may go unanswered: 10 s is
	// several WAN round trips even on a congested link.
	KeepaliveTimeout = 10 * time.Second
)

// ServerOptions returns the gRPC server options of a publishing relay:
// creds (nil means plaintext, for loopback and tests; pass
// credentials.NewTLS for TLS or mTLS) and the keepalive policy.
func ServerOptions(creds credentials.TransportCredentials) []grpc.ServerOption {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return []grpc.ServerOption{
		grpc.Creds(creds),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveTime / 2, PermitWithoutStream: true}),
	}
}

// DialOptions returns the gRPC dial options of a subscribing relay, with
// the same credential rule as ServerOptions.
func DialOptions(creds credentials.TransportCredentials) []grpc.DialOption {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}),
	}
}
