package natsbus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Embedded is the value of the --nats option that runs an in-process server.
const Embedded = "embedded"

// DefaultEmbeddedAddr is where an embedded server listens unless told
// otherwise: loopback only, on the standard NATS port, so that engines on
// the same machine find it without configuration.
const DefaultEmbeddedAddr = "127.0.0.1:4222"

// ReadyTimeout bounds the wait for an embedded server to accept connections
// and for the first connection to an external one.
const ReadyTimeout = 10 * time.Second

// ErrConfig is returned for an invalid NATS option.
var ErrConfig = errors.New("natsbus: invalid config")

// Config selects the NATS server.
type Config struct {
	// URL is Embedded or a nats:// URL (comma-separated for a cluster).
	URL string
	// EmbeddedAddr is the listen address of an embedded server; port 0
	// picks a free port.
	EmbeddedAddr string
	// Name is the client connection name shown by the server.
	Name string
	// OnConnected is called with true/false as the connection comes and goes.
	OnConnected func(bool)
}

// Bus is a NATS connection, plus the server when it is embedded.
type Bus struct {
	Conn *nats.Conn
	srv  *server.Server
	once sync.Once
}

// Validate checks the options; errors name the option.
func (c Config) Validate() error {
	if c.URL == "" || c.URL == Embedded {
		if c.EmbeddedAddr == "" {
			return nil
		}
		if _, _, err := splitAddr(c.EmbeddedAddr); err != nil {
			return fmt.Errorf("%w: nats_listen %q: %v", ErrConfig, c.EmbeddedAddr, err)
		}
		return nil
	}
	for u := range strings.SplitSeq(c.URL, ",") {
		if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
			return fmt.Errorf("%w: nats %q: want %q or nats://host:port", ErrConfig, u, Embedded)
		}
	}
	return nil
}

func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

// Open starts an embedded server if asked, then connects.
func Open(cfg Config, log *slog.Logger) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Bus{}
	url := cfg.URL
	if url == "" || url == Embedded {
		srv, err := startEmbedded(cfg.EmbeddedAddr)
		if err != nil {
			return nil, err
		}
		b.srv, url = srv, srv.ClientURL()
		log.Info("embedded NATS server started", "url", url)
	}
	nc, err := nats.Connect(url, connectOptions(cfg, log)...)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	b.Conn = nc
	if cfg.OnConnected != nil {
		cfg.OnConnected(true)
	}
	return b, nil
}

func startEmbedded(addr string) (*server.Server, error) {
	if addr == "" {
		addr = DefaultEmbeddedAddr
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: nats_listen %q: %v", ErrConfig, addr, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else if err := probeListen(host, port); err != nil {
		// The server would retry its bind and report only that it never
		// became ready; a taken port is said at once, as such.
		return nil, fmt.Errorf("nats_listen %s: %w", addr, err)
	}
	opts := &server.Options{Host: host, Port: port, NoLog: true, NoSigs: true, MaxPayload: 8 << 20}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("embedded NATS server did not listen on %s within %v", addr, ReadyTimeout)
	}
	return srv, nil
}

func connectOptions(cfg Config, log *slog.Logger) []nats.Option {
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(ReadyTimeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("NATS disconnected", "err", err)
			if cfg.OnConnected != nil {
				cfg.OnConnected(false)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "url", nc.ConnectedUrl())
			if cfg.OnConnected != nil {
				cfg.OnConnected(true)
			}
		}),
	}
	return opts
}

// URL is the client URL of the server the bus is connected to, for engines
// that should join the same server.
func (b *Bus) URL() string {
	if b.srv != nil {
		return b.srv.ClientURL()
	}
	if b.Conn != nil {
		return b.Conn.ConnectedUrl()
	}
	return ""
}

// Close drains the connection and stops an embedded server.
func (b *Bus) Close() {
	b.once.Do(func() {
		if b.Conn != nil {
			_ = b.Conn.Drain()
			for b.Conn.IsDraining() {
				time.Sleep(5 * time.Millisecond)
			}
			b.Conn.Close()
		}
		if b.srv != nil {
			b.srv.Shutdown()
			b.srv.WaitForShutdown()
		}
	})
}

// probeListen binds host:port and releases it, to learn whether the
// embedded server can listen there.
func probeListen(host string, port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}
