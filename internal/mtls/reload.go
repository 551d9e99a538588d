package mtls

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ReloadInterval is how often, at most, a Reloader looks at its files:
// one stat of two files per second is nothing, and a rotated certificate
// is in use within a second of its files being replaced.
const ReloadInterval = time.Second

// Reloader serves a certificate from PEM files and loads them again when
// they change, so that a rotated certificate (cert-manager rewriting a
// Secret's files, an operator replacing them) is served without a
// restart. It is checked on handshakes, not by a goroutine: a listener
// nobody connects to costs nothing, and there is nothing to stop.
//
// A change is a different modification time or size of either file. A
// pair that fails to load (a half-written file, a key that does not match
// the certificate) is reported and the previous certificate stays in
// use; the files are tried again at the next check.
//
// A Reloader is safe for concurrent use.
type Reloader struct {
	prefix, certFile, keyFile string
	// Interval is the least time between two checks; ReloadInterval
	// unless set before the first handshake.
	Interval time.Duration
	// Now is the clock of the checks; nil means time.Now.
	Now func() time.Time
	// Reloaded, when set, is told the outcome of every reload attempt
	// (nil error on success).
	Reloaded func(error)

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
}

// fileStamp is what tells a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// NewReloader loads the pair once, so that a bad configuration fails at
// start; prefix names the keys in errors, "<prefix>_cert/<prefix>_key".
func NewReloader(prefix, certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{prefix: prefix, certFile: certFile, keyFile: keyFile, Interval: ReloadInterval}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// ServerConfig returns a server configuration that asks clients for no
// certificate and serves the Reloader's. It allows TLS 1.2 for clients
// that have no 1.3.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12}
}

// GetCertificate is the tls.Config hook: the current certificate, after
// reloading it when its files changed since the last check.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.checked) >= r.Interval {
		r.checked = now
		if r.changed() {
			err := r.loadLocked()
			if r.Reloaded != nil {
				r.Reloaded(err)
			}
		}
	}
	return r.cert, nil
}

// GetClientCertificate is the client side's hook, for a link that
// presents the same pair as client: the current certificate, reloaded
// like GetCertificate's.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.GetCertificate(nil)
}

// load reads the pair under the lock.
func (r *Reloader) load() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loadLocked()
}

// loadLocked reads the pair and records the files' stamps; on failure
// the previous certificate and stamps stay, so that the next check tries
// again.
func (r *Reloader) loadLocked() error {
	stamp := r.stat()
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("%w: %s_cert/%s_key: %v", ErrFiles, r.prefix, r.prefix, err)
	}
	r.cert, r.stamp = &cert, stamp
	return nil
}

// changed reports whether either file differs from the loaded stamps.
func (r *Reloader) changed() bool {
	return r.stat() != r.stamp
}

// stat returns the files' current stamps (zero for a missing file).
func (r *Reloader) stat() [2]fileStamp {
	var s [2]fileStamp
	for i, f := range []string{r.certFile, r.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			s[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
		}
	}
	return s
}

func (r *Reloader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// LogReloads returns a Reloaded hook that logs each reload of link's
// certificate: a failure at warn (the previous certificate stays in use),
// a success at info. The error names files, never their contents.
func LogReloads(log *slog.Logger, link string) func(error) {
	if log == nil {
		return nil
	}
	return func(err error) {
		if err != nil {
			log.Warn("certificate reload failed; serving the previous one", "link", link, "err", err)
			return
		}
		log.Info("certificate reloaded", "link", link)
	}
}
