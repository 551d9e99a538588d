package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrFiles reports a certificate, key or CA file that cannot be used.
var ErrFiles = errors.New("mutual TLS files")

// Files names one member's mutual TLS files.
type Files struct {
	Cert, Key, CA string
}

// Enabled reports whether any file is set.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Check reports a partial set: TLS needs all three files or none. prefix
// names the keys in the message.
func (f Files) Check(prefix string) error {
	if f.Enabled() && (f.Cert == "" || f.Key == "" || f.CA == "") {
		return fmt.Errorf("%w: %s_cert, %s_key and %s_ca go together", ErrFiles, prefix, prefix, prefix)
	}
	return nil
}

// Load reads the files into the server and client configurations of
// mutual TLS; prefix names their keys in errors. The certificate and key
// are served through one Reloader, by GetCertificate on the server side
// and GetClientCertificate on the client side, so that rewritten files
// are presented at the next handshake without a restart (Certificates
// stays empty: crypto/tls would prefer it to GetCertificate when a client
// sends no server name, as one dialling an IP address does; Own reads the
// current certificate). The CA is read once: it verifies peers for the life of the process.
func Load(prefix string, f Files) (server, client *tls.Config, err error) {
	return LoadReloading(prefix, f, nil)
}

// LoadReloading is Load that tells reloaded (when not nil) the outcome of
// every reload of the pair, nil on success, so that the caller can log it:
// a failed reload keeps the previous certificate in use.
func LoadReloading(prefix string, f Files, reloaded func(error)) (server, client *tls.Config, err error) {
	r, err := NewReloader(prefix, f.Cert, f.Key)
	if err != nil {
		return nil, nil, err
	}
	r.Reloaded = reloaded
	pool, err := CAPool(prefix+"_ca", f.CA)
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{GetCertificate: r.GetCertificate, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{GetClientCertificate: r.GetClientCertificate, RootCAs: pool,
		MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// Own is the leaf certificate a configuration presents: its first
// Certificates entry, or else the current one of its GetCertificate (a
// server's) or GetClientCertificate (a client's); nil when it has none.
func Own(cfg *tls.Config) *x509.Certificate {
	var c *tls.Certificate
	switch {
	case len(cfg.Certificates) > 0:
		c = &cfg.Certificates[0]
	case cfg.GetCertificate != nil:
		c, _ = cfg.GetCertificate(nil)
	case cfg.GetClientCertificate != nil:
		c, _ = cfg.GetClientCertificate(nil)
	}
	if c == nil {
		return nil
	}
	return c.Leaf
}

// CAPool reads the PEM certificates of file into a pool; key names the
// file's configuration key in errors.
func CAPool(key, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFiles, key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s %s: no PEM certificate", ErrFiles, key, file)
	}
	return pool, nil
}
