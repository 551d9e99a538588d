package consensus

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStreamLayer is raft's stream layer over TLS: the transport raft's
// NetworkTransport runs on when the cluster network is not trusted.
type tlsStreamLayer struct {
	ln     net.Listener
	client *tls.Config
}

// NewTLSTransport returns a raft transport on addr whose connections are
// TLS: server authenticates (and, with ClientAuth set in server, verifies
// peers' certificates), client dials. maxPool and timeout are raft's
// NetworkTransport parameters; its warnings go to log as node's.
func NewTLSTransport(addr string, server, client *tls.Config, maxPool int, timeout time.Duration, log *slog.Logger, node string) (*raft.NetworkTransport, error) {
	if server == nil || client == nil {
		return nil, errors.New("consensus: tls transport needs a server and a client config")
	}
	ln, err := tls.Listen("tcp", addr, server)
	if err != nil {
		return nil, fmt.Errorf("consensus: raft tls listener on %s: %w", addr, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return raft.NewNetworkTransportWithLogger(&tlsStreamLayer{ln: ln, client: client}, maxPool, timeout, newHclogAdapter(log, node)), nil
}

func (s *tlsStreamLayer) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *tlsStreamLayer) Close() error              { return s.ln.Close() }
func (s *tlsStreamLayer) Addr() net.Addr            { return s.ln.Addr() }

// Dial implements raft.StreamLayer.
func (s *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), s.client)
}
