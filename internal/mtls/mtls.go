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
// mutual TLS; prefix names their keys in errors.
func Load(prefix string, f Files) (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s_cert/%s_key: %v", ErrFiles, prefix, prefix, err)
	}
	pool, err := CAPool(prefix+"_ca", f.CA)
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// ServerCert loads a server certificate for a listener that asks clients
// for none (a client-facing HTTPS API); prefix names the keys in errors,
// "<prefix>_cert/<prefix>_key".
func ServerCert(prefix, certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %s_cert/%s_key: %v", ErrFiles, prefix, prefix, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
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
