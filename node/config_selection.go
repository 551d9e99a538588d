package node

import (
	"fmt"
	"net"

	"github.com/kvrouter/kvrouter/internal/secure"
	"github.com/kvrouter/kvrouter/node/extproc"
	"github.com/kvrouter/kvrouter/node/selection"
)

// Default addresses of the selection edges when turned on without one:
// loopback, as every listener of a node is by default. 9002 is the
// Gateway API Inference Extension's endpoint-picker port.
const (
	DefaultSelectAddr  = "127.0.0.1:8001"
	DefaultExtProcAddr = "127.0.0.1:9002"
)

// SelectionConfig configures the node's selection edges: the selection
// API (node/selection) and the gateway's endpoint picker (node/extproc).
// Both decide through the node's dispatcher, as the OpenAI frontend does.
type SelectionConfig struct {
	// NoFrontend (no_frontend) turns the OpenAI proxy off: http_addr then
	// serves health, readiness, metrics, the admin routes and the
	// selection API's HTTP/JSON mirror, and the node routes for its
	// selection edges only. The cluster, event plane and bindings run as
	// ever.
	NoFrontend bool
	// Addr (select_addr) is the selection API's gRPC listen address;
	// empty, off. The HTTP/JSON mirror is always on http_addr.
	Addr string
	// ExtProcAddr (ext_proc_addr) is the endpoint picker's (Envoy
	// ext_proc) gRPC listen address; empty, off.
	ExtProcAddr string
	// ClientCA (select_client_ca) is a PEM CA that must sign the
	// certificates of the two gRPC listeners' clients (mutual TLS, with
	// tls_cert and tls_key): the gateway and the callers of the API.
	// Required with tls_cert for a non-loopback address.
	ClientCA string
	// API and ExtProc are the edges' own options.
	API     selection.Config
	ExtProc extproc.Config
}

// enableSelectTLS names the flags that secure the selection listeners.
const enableSelectTLS = "--tls-cert, --tls-key and --select-client-ca (mutual TLS)"

// validate checks the addresses; the edges validate their own options
// when they start.
func (c *SelectionConfig) validate() error {
	for _, a := range []struct{ key, addr string }{{"select_addr", c.Addr}, {"ext_proc_addr", c.ExtProcAddr}} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("%w: %s %q: %v", ErrConfig, a.key, a.addr, err)
		}
	}
	return nil
}

// listeners are the selection edges' sockets for secure.Check: exposed,
// they need TLS and client certificates.
func (c *Config) selectionListeners() []secure.Listener {
	mutual := c.TLSCert != "" && c.Selection.ClientCA != ""
	return []secure.Listener{
		{Key: "select_addr", Addr: c.Selection.Addr, TLS: mutual, Enable: enableSelectTLS},
		{Key: "ext_proc_addr", Addr: c.Selection.ExtProcAddr, TLS: mutual, Enable: enableSelectTLS},
	}
}
