package mtls_test

import (
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
)

func TestCheckNeedsAllThreeFiles(t *testing.T) {
	tests := []struct {
		name string
		f    mtls.Files
		ok   bool
	}{
		{name: "none", ok: true},
		{name: "all", f: mtls.Files{Cert: "c", Key: "k", CA: "a"}, ok: true},
		{name: "cert only", f: mtls.Files{Cert: "c"}},
		{name: "no ca", f: mtls.Files{Cert: "c", Key: "k"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Check("wan_tls")
			if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "wan_tls_ca")) {
				t.Fatalf("Check: %v", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	pki := mtlstest.WritePKI(t, t.TempDir())
	server, client, err := mtls.Load("wan_tls", pki)
	if err != nil {
		t.Fatal(err)
	}
	if server.ClientAuth != tls.RequireAndVerifyClientCert || client.GetClientCertificate == nil || client.RootCAs == nil || mtls.Own(server) == nil {
		t.Fatalf("server %+v client %+v", server.ClientAuth, client)
	}
	for _, tc := range []struct {
		name string
		f    mtls.Files
		key  string
	}{
		{name: "missing key", f: mtls.Files{Cert: pki.Cert, Key: filepath.Join(t.TempDir(), "none"), CA: pki.CA}, key: "wan_tls_cert/wan_tls_key"},
		{name: "ca is not a certificate", f: mtls.Files{Cert: pki.Cert, Key: pki.Key, CA: pki.Key}, key: "wan_tls_ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := mtls.Load("wan_tls", tc.f); !errors.Is(err, mtls.ErrFiles) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err %v, want one naming %s", err, tc.key)
			}
		})
	}
}
