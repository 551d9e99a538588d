package consensus

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/internal/mtls"
)

// tlsStreamLayer is raft's stream layer over TLS: the transport raft's
// NetworkTransport runs on when the cluster network is not trusted.
type tlsStreamLayer struct {
	ln       net.Listener
	client   *tls.Config
	memberAt func(raft.ServerAddress) string
}

// NewTLSTransport returns a raft transport on addr whose connections are
// TLS: server authenticates (and, with ClientAuth set in server, verifies
// peers' certificates), client dials. memberAt, when not nil, names the
// member expected at a raft address (Node.MemberAt): a dialled server
// whose certificate names another member is refused, so a member's
// certificate cannot stand in for another's address. maxPool and timeout
// are raft's NetworkTransport parameters; its warnings go to log as
// node's.
func NewTLSTransport(addr string, server, client *tls.Config, memberAt func(raft.ServerAddress) string, maxPool int, timeout time.Duration, log *slog.Logger, node string) (*raft.NetworkTransport, error) {
	if server == nil || client == nil {
		return nil, errors.New("consensus: tls transport needs a server and a client config")
	}
	ln, err := tls.Listen("tcp", addr, server)
	if err != nil {
		return nil, fmt.Errorf("consensus: raft tls listener on %s: %w", addr, err)
	}
	log = cmp.Or(log, slog.New(slog.DiscardHandler))
	return raft.NewNetworkTransportWithConfig(transportConfig(&tlsStreamLayer{ln: ln, client: client, memberAt: memberAt}, maxPool, timeout, newHclogAdapter(log, node))), nil
}

// transportConfig is raft's NetworkTransport configuration for both of
// our transports. MaxRPCsInFlight is 1, which turns off pipelined
// replication: in hashicorp/raft v1.8.0 a follower's Success=false
// during pipelining can park the leader's send and decode loops on each
// other (hashicorp/raft#612), after which that follower gets heartbeats
// but no entries and Shutdown never returns. Synchronous AppendEntries
// cost nothing measurable at our write rate (ownership batches, bindings).
func transportConfig(stream raft.StreamLayer, maxPool int, timeout time.Duration, log hclog.Logger) *raft.NetworkTransportConfig {
	return &raft.NetworkTransportConfig{Stream: stream, MaxPool: maxPool, MaxRPCsInFlight: 1, Timeout: timeout, Logger: log}
}

func (s *tlsStreamLayer) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *tlsStreamLayer) Close() error              { return s.ln.Close() }
func (s *tlsStreamLayer) Addr() net.Addr            { return s.ln.Addr() }

// Dial implements raft.StreamLayer.
func (s *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), s.expect(address))
}

// expect is the client configuration for a dial of address: it also
// checks the member name when memberAt knows it.
func (s *tlsStreamLayer) expect(address raft.ServerAddress) *tls.Config {
	if s.memberAt == nil {
		return s.client
	}
	want := s.memberAt(address)
	if want == "" {
		return s.client
	}
	c := s.client.Clone()
	prev := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("raft peer presented no certificate")
		}
		id, err := mtls.IdentityOf(cs.PeerCertificates[0])
		if err != nil || id.Name != want {
			return fmt.Errorf("raft peer at %s is not member %s (certificate: %v)", address, want, cmp.Or(error(err), errors.New(id.String())))
		}
		return nil
	}
	return c
}
