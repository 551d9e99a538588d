package natsbus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"
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
	// Auth is how the process authenticates to an external server.
	Auth ClientAuth
	// Server secures an embedded server.
	Server ServerSecurity
	// DC is the data centre whose subjects an embedded server's engine
	// users are confined to; required with Server.UsersFile.
	DC string
	// OnViolation is called with the kind (ViolationAuthentication,
	// ViolationPublish, ViolationSubscribe) of every client operation an
	// embedded server refuses.
	OnViolation func(kind string)
}

// ServerSecurity is the authentication and TLS of an embedded server.
// With neither, the server accepts any client: fit only for loopback.
type ServerSecurity struct {
	// UsersFile (nats_users) is the YAML file of the routers' and engines'
	// credentials (see Users); set, a client without valid credentials is
	// refused and each engine may publish only on its own subjects.
	UsersFile string
	// TLSCert and TLSKey (nats_listen_tls_cert, nats_listen_tls_key) make
	// the server speak TLS only; TLSCA (nats_listen_tls_ca) makes it
	// require a client certificate signed by that CA as well.
	TLSCert, TLSKey, TLSCA string
}

// Enabled reports whether any security is configured.
func (s ServerSecurity) Enabled() bool { return s.UsersFile != "" || s.TLSCert != "" }

func (s ServerSecurity) validate() error {
	switch {
	case (s.TLSCert == "") != (s.TLSKey == ""):
		return fmt.Errorf("%w: nats_listen_tls_cert and nats_listen_tls_key go together", ErrConfig)
	case s.TLSCA != "" && s.TLSCert == "":
		return fmt.Errorf("%w: nats_listen_tls_ca needs nats_listen_tls_cert", ErrConfig)
	}
	return nil
}

// Bus is a NATS connection, plus the server when it is embedded.
type Bus struct {
	Conn *nats.Conn
	srv  *server.Server
	once sync.Once
}

// Validate checks the options; errors name the option.
func (c Config) Validate() error {
	if c.embedded() {
		if c.Auth != (ClientAuth{}) {
			return fmt.Errorf("%w: nats_creds, nats_nkey_seed, nats_user, nats_token and nats_tls_* are for an external server (with an embedded one: nats_users, nats_listen_tls_*)", ErrConfig)
		}
		if err := c.Server.validate(); err != nil {
			return err
		}
		if c.Server.UsersFile != "" && c.DC == "" {
			return fmt.Errorf("%w: nats_users needs the dc", ErrConfig)
		}
		if c.EmbeddedAddr == "" {
			return nil
		}
		if _, _, err := splitAddr(c.EmbeddedAddr); err != nil {
			return fmt.Errorf("%w: nats_listen %q: %v", ErrConfig, c.EmbeddedAddr, err)
		}
		return nil
	}
	if c.Server.Enabled() {
		return fmt.Errorf("%w: nats_users and nats_listen_tls_* secure an embedded server, and --nats is %q", ErrConfig, c.URL)
	}
	if err := c.Auth.Validate(); err != nil {
		return err
	}
	for u := range strings.SplitSeq(c.URL, ",") {
		if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
			return fmt.Errorf("%w: nats %q: want %q or nats://host:port", ErrConfig, u, Embedded)
		}
	}
	return nil
}

func (c Config) embedded() bool { return c.URL == "" || c.URL == Embedded }

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
	dial := url
	opts := connectOptions(cfg, log)
	if cfg.embedded() {
		srv, self, err := startEmbedded(cfg, log)
		if err != nil {
			return nil, err
		}
		b.srv, url = srv, srv.ClientURL()
		// The process's own connection is in-process: no socket, no TLS,
		// and a user only it knows. The server lets in-process clients
		// skip TLS; a tls:// URL would make the client ask for it anyway
		// and verify the listen address (0.0.0.0 on an exposed node) as
		// the server's name.
		dial = strings.Replace(url, "tls://", "nats://", 1)
		opts = append(opts, nats.InProcessServer(srv))
		if self != nil {
			opts = append(opts, self)
		}
		log.Info("embedded NATS server started", "url", url, "users", cfg.Server.UsersFile != "",
			"tls", cfg.Server.TLSCert != "", "client_certs", cfg.Server.TLSCA != "")
	} else {
		auth, err := cfg.Auth.options()
		if err != nil {
			return nil, err
		}
		opts = append(opts, auth...)
	}
	nc, err := nats.Connect(dial, opts...)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("connecting to NATS at %s (auth %s): %w", redactURLs(url), cfg.Auth.Method(), err)
	}
	b.Conn = nc
	if cfg.OnConnected != nil {
		cfg.OnConnected(true)
	}
	return b, nil
}

// startEmbedded starts the in-process server and returns it with the
// option that authenticates the process's own connection (nil when the
// server has no users).
func startEmbedded(cfg Config, log *slog.Logger) (*server.Server, nats.Option, error) {
	addr := cfg.EmbeddedAddr
	if addr == "" {
		addr = DefaultEmbeddedAddr
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: nats_listen %q: %v", ErrConfig, addr, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else if err := probeListen(host, port); err != nil {
		// The server would retry its bind and report only that it never
		// became ready; a taken port is said at once, as such.
		return nil, nil, fmt.Errorf("nats_listen %s: %w", addr, err)
	}
	opts := &server.Options{Host: host, Port: port, NoLog: true, NoSigs: true, MaxPayload: 8 << 20}
	self, err := secure(opts, cfg)
	if err != nil {
		return nil, nil, err
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	srv.SetLoggerV2(newServerLog(log, cfg.OnViolation), false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, nil, fmt.Errorf("embedded NATS server did not listen on %s within %v", addr, ReadyTimeout)
	}
	return srv, self, nil
}

// secure installs the users and TLS of cfg.Server on the server options.
func secure(opts *server.Options, cfg Config) (nats.Option, error) {
	s := cfg.Server
	if s.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: s.TLSCert, KeyFile: s.TLSKey, CaFile: s.TLSCA, Verify: s.TLSCA != ""})
		if err != nil {
			return nil, fmt.Errorf("%w: nats_listen_tls_*: %v", ErrConfig, err)
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify, opts.TLSTimeout = tc, true, s.TLSCA != "", 2
	}
	if s.UsersFile == "" {
		return nil, nil
	}
	users, err := LoadUsers(s.UsersFile)
	if err != nil {
		return nil, err
	}
	user, password, err := users.apply(opts, cfg.DC)
	if err != nil {
		return nil, err
	}
	return nats.UserInfo(user, password), nil
}

func connectOptions(cfg Config, log *slog.Logger) []nats.Option {
	warnAsync := &rate.Sometimes{Interval: violationLogEvery}
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
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			// Slow-consumer drops are counted by their subscriber; a
			// permission error means this process's credentials lack a
			// right it needs. Either is worth a line, not one per message.
			warnAsync.Do(func() {
				subject := ""
				if sub != nil {
					subject = sub.Subject
				}
				log.Warn("NATS asynchronous error", "subject", subject, "err", err)
			})
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted())
			if cfg.OnConnected != nil {
				cfg.OnConnected(true)
			}
		}),
	}
	return opts
}

// URL is the client URL of the server the bus is connected to, for engines
// that should join the same server (and for logs: a password in an
// external server's URL is redacted).
func (b *Bus) URL() string {
	if b.srv != nil {
		return b.srv.ClientURL()
	}
	if b.Conn != nil {
		return b.Conn.ConnectedUrlRedacted()
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

// redactURLs hides the passwords of a comma-separated list of server URLs
// (nats://user:password@host), for messages that may be logged.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(p); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
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
