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

// TestLoadReloadsMutualTLS rewrites both ends' certificate files under a
// live mutual-TLS listener (the configurations of Load, guarded by
// identity as the cluster's and the WAN's links are) and checks that,
// after the reload interval, each end presents the new certificate
// issued by the same CA, and the other end still accepts it.
func TestLoadReloadsMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := mtlstest.NewCA(t, t.TempDir())
	srvID := mtls.Identity{DC: "dc1", Role: mtls.RoleMember, Name: "n1"}
	cliID := mtls.Identity{DC: "dc1", Role: mtls.RoleMember, Name: "n2"}
	srvFiles := mtls.Files{Cert: filepath.Join(dir, "srv.crt"), Key: filepath.Join(dir, "srv.key"), CA: ca.File}
	cliFiles := mtls.Files{Cert: filepath.Join(dir, "cli.crt"), Key: filepath.Join(dir, "cli.key"), CA: ca.File}
	srvOld, cliOld := ca.Issue(t, srvID), ca.Issue(t, cliID)
	install(t, srvOld, srvFiles.Cert, srvFiles.Key, time.Unix(1_000_000, 0))
	install(t, cliOld, cliFiles.Cert, cliFiles.Key, time.Unix(1_000_000, 0))
	server, _, err := mtls.Load("cluster_tls", srvFiles)
	if err != nil {
		t.Fatal(err)
	}
	_, client, err := mtls.Load("cluster_tls", cliFiles)
	if err != nil {
		t.Fatal(err)
	}
	member := mtls.AcceptRoles("dc1", mtls.RoleMember)
	seen := make(chan []byte, 4)
	guarded := mtls.Guard(server, member, nil)
	verify := guarded.VerifyConnection
	guarded.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) > 0 {
			seen <- cs.PeerCertificates[0].Raw
		}
		return verify(cs)
	}
	addr := serveTLS(t, guarded)
	client = mtls.VerifyServer(client, member)

	handshake := func() (served, presented []byte) {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, client)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw, <-seen
	}
	if s, p := handshake(); !bytes.Equal(s, leaf(t, srvOld)) || !bytes.Equal(p, leaf(t, cliOld)) {
		t.Fatal("the first certificates are not the ones presented")
	}
	srvNew, cliNew := ca.Issue(t, srvID), ca.Issue(t, cliID)
	install(t, srvNew, srvFiles.Cert, srvFiles.Key, time.Unix(2_000_000, 0))
	install(t, cliNew, cliFiles.Cert, cliFiles.Key, time.Unix(2_000_000, 0))
	time.Sleep(mtls.ReloadInterval + 100*time.Millisecond)
	if s, p := handshake(); !bytes.Equal(s, leaf(t, srvNew)) || !bytes.Equal(p, leaf(t, cliNew)) {
		t.Fatal("the rewritten certificates are not the ones presented")
	}
}
