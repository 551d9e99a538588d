package mtls_test

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
)

// TestGuardRefusesAndCounts: a guarded server accepts only the identities
// it allows, and every refusal, a missing certificate included, is
// reported with its reason.
func TestGuardRefusesAndCounts(t *testing.T) {
	ca := mtlstest.NewCA(t, t.TempDir())
	other := mtlstest.NewCA(t, t.TempDir())
	member := ca.Issue(t, mtls.Identity{DC: "dc1", Role: mtls.RoleMember, Name: "n1"})
	server, _, err := mtls.Load("cluster_tls", member)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	guarded := mtls.Guard(server, mtls.AcceptRoles("dc1", mtls.RoleMember), func(r string) { reasons = append(reasons, r) })
	tests := []struct {
		name   string
		files  *mtls.Files
		reason string
	}{
		{name: "member of the dc", files: &member},
		{name: "no certificate", reason: mtls.ReasonNoCertificate},
		{name: "another ca", files: ptr(other.Issue(t, mtls.Identity{DC: "dc1", Role: mtls.RoleMember, Name: "n9"})), reason: mtls.ReasonUntrusted},
		{name: "another dc", files: ptr(ca.Issue(t, mtls.Identity{DC: "dc2", Role: mtls.RoleMember, Name: "n1"})), reason: mtls.ReasonWrongDC},
		{name: "a relay", files: ptr(ca.Issue(t, mtls.Identity{DC: "dc1", Role: mtls.RoleRelay, Name: "r"})), reason: mtls.ReasonWrongRole},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reasons = nil
			client := &tls.Config{RootCAs: server.ClientCAs, MinVersion: tls.VersionTLS13, ServerName: "127.0.0.1"}
			if tc.files != nil {
				cert, err := tls.LoadX509KeyPair(tc.files.Cert, tc.files.Key)
				if err != nil {
					t.Fatal(err)
				}
				client.Certificates = []tls.Certificate{cert}
			}
			err := handshake(t, guarded, client)
			if (err == nil) != (tc.reason == "") {
				t.Fatalf("handshake: %v, want refusal %q", err, tc.reason)
			}
			if tc.reason != "" && (len(reasons) != 1 || reasons[0] != tc.reason) {
				t.Fatalf("reasons %v, want [%s]", reasons, tc.reason)
			}
		})
	}
}

func TestIdentityOf(t *testing.T) {
	ca := mtlstest.NewCA(t, t.TempDir())
	want := mtls.Identity{DC: "eu", Role: mtls.RoleOperator, Name: "alice"}
	f := ca.Issue(t, want)
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := mtls.IdentityOf(cert.Leaf)
	if err != nil || got != want {
		t.Fatalf("IdentityOf = %v, %v; want %v", got, err, want)
	}
	plain := mtlstest.WritePKI(t, t.TempDir())
	cert, err = tls.LoadX509KeyPair(plain.Cert, plain.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mtls.IdentityOf(cert.Leaf); !errors.Is(err, mtls.ErrNoIdentity) {
		t.Fatalf("a certificate without identity: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// handshake runs one TLS handshake over loopback TCP; it returns the
// server's error, or the client's when the server accepted.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errs := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			errs <- err
			return
		}
		s := tls.Server(conn, server)
		err = s.Handshake()
		if err == nil {
			// TLS 1.3 clients learn of a refused certificate on first read.
			_, err = s.Write([]byte{1})
		}
		_ = s.Close()
		errs <- err
	}()
	c, cerr := tls.Dial("tcp", ln.Addr().String(), client)
	if cerr == nil {
		_, cerr = c.Read(make([]byte, 1))
		_ = c.Close()
	}
	if err := <-errs; err != nil {
		return err
	}
	return cerr
}
