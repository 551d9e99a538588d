package oaiedge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/mtls"
)

// ServerTLS builds an edge's server TLS from the files of the options
// prefix_cert and prefix_key: the certificate served through a Reloader
// (a rotated certificate is served without a restart), and, with
// operatorCA, client certificates asked for and verified against it,
// which the edge takes as operator credentials. Nil without a
// certificate.
func ServerTLS(prefix, cert, key, operatorCA string) (*tls.Config, *mtls.Reloader, error) {
	if cert == "" {
		if operatorCA != "" {
			return nil, nil, fmt.Errorf("operator_ca needs %[1]s_cert and %[1]s_key: client certificates travel over TLS", prefix)
		}
		return nil, nil, nil
	}
	r, err := mtls.NewReloader(prefix, cert, key)
	if err != nil {
		return nil, nil, err
	}
	cfg := r.ServerConfig()
	if operatorCA != "" {
		if cfg.ClientCAs, err = mtls.CAPool("operator_ca", operatorCA); err != nil {
			return nil, nil, err
		}
		// Clients of the OpenAI API have no certificate; operators (and a
		// gateway's peers) may.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, r, nil
}

// WatchReloads counts the reloads of an edge's certificate r (nil: none)
// in m and logs them, naming the certificate by what ("client-facing",
// "gateway").
func WatchReloads(r *mtls.Reloader, m *metrics.Edge, log *slog.Logger, what string) {
	if r == nil {
		return
	}
	r.Reloaded = func(err error) {
		m.Reloaded(err)
		if err != nil {
			log.Warn(what+" certificate reload failed; serving the previous one", "err", err)
			return
		}
		log.Info(what + " certificate reloaded")
	}
}

// ServeAdmin starts an edge's admin listener on addr when it is set,
// over tlsCfg when there is one, serving it with serve (the edge's
// ServeAdmin) until ctx ends, and returns what waits for serve to
// return. started is the log line that says the listener is up.
func ServeAdmin(ctx context.Context, addr string, tlsCfg *tls.Config, serve func(context.Context, net.Listener) error,
	log *slog.Logger, started string) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin_addr %s: %w", addr, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serve(ctx, ln); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Warn("admin listener stopped", "err", err)
		}
	}()
	log.Info(started, "admin", ln.Addr().String())
	return func() { <-done }, nil
}

// ServeUntil serves srv on ln until ctx ends, then shuts srv down,
// waiting up to grace for the requests in flight before it closes them.
// It returns nil after that stop, else Serve's error.
func ServeUntil(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
