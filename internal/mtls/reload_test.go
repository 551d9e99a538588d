package mtls_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
)

// TestReloaderServesRewrittenFiles rewrites a listener's certificate
// files in place and checks that the next handshake serves the new
// certificate, and that a broken rewrite keeps the old one.
func TestReloaderServesRewrittenFiles(t *testing.T) {
	dir := t.TempDir()
	first := mtlstest.WritePKI(t, t.TempDir())
	second := mtlstest.WritePKI(t, t.TempDir())
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	install(t, first, cert, key, time.Unix(1_000_000, 0))
	r, err := mtls.NewReloader("tls", cert, key)
	if err != nil {
		t.Fatal(err)
	}
	r.Interval = 0
	var outcomes []error
	r.Reloaded = func(err error) { outcomes = append(outcomes, err) }
	addr := serveTLS(t, r.ServerConfig())

	want := leaf(t, first)
	if got := servedCert(t, addr); !bytes.Equal(got, want) {
		t.Fatal("the first certificate is not the one served")
	}
	install(t, second, cert, key, time.Unix(2_000_000, 0))
	if got := servedCert(t, addr); !bytes.Equal(got, leaf(t, second)) {
		t.Fatal("the rewritten certificate is not served")
	}
	if err := os.WriteFile(cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedCert(t, addr); !bytes.Equal(got, leaf(t, second)) {
		t.Fatal("a broken rewrite replaced the served certificate")
	}
	if len(outcomes) != 2 || outcomes[0] != nil || outcomes[1] == nil {
		t.Fatalf("reload outcomes %v, want success then an error", outcomes)
	}
}

func TestNewReloaderRefusesABadPair(t *testing.T) {
	pki := mtlstest.WritePKI(t, t.TempDir())
	if _, err := mtls.NewReloader("tls", pki.Cert, pki.CA); err == nil {
		t.Fatal("a certificate with the wrong key was accepted")
	}
}

// install copies a PKI's certificate and key to cert and key, stamped
// with mod so that the change shows whatever the file system's clock
// resolution.
func install(t *testing.T, f mtls.Files, cert, key string, mod time.Time) {
	t.Helper()
	for src, dst := range map[string]string{f.Cert: cert, f.Key: key} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dst, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
}

// leaf is the DER of a PKI's certificate.
func leaf(t *testing.T, f mtls.Files) []byte {
	t.Helper()
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c.Certificate[0]
}

// serveTLS accepts connections on loopback and completes their
// handshakes until the test ends.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

// servedCert is the DER of the certificate the server at addr presents.
func servedCert(t *testing.T, addr string) []byte {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: func([][]byte, [][]*x509.Certificate) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Raw
}
