package mtlstest

import (
	"crypto/ecdsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/mtls"
)

// CA is a throwaway certificate authority that issues identity
// certificates (kvr://<dc>/<role>/<name> URI SANs) for loopback.
type CA struct {
	dir    string
	cert   *x509.Certificate
	signer *ecdsa.PrivateKey
	serial atomic.Int64
	// File is the CA certificate's PEM file.
	File string
}

// NewCA writes a CA certificate to dir.
func NewCA(t testing.TB, dir string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kvrouter test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der := create(t, tmpl, tmpl, key, key)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{dir: dir, cert: cert, signer: key}
	ca.serial.Store(1)
	ca.File = writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", der)
	return ca
}

// Issue writes a certificate and key for id (valid for 127.0.0.1, server
// and client use) and returns the member's files with the CA.
func (ca *CA) Issue(t testing.TB, id mtls.Identity) mtls.Files {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: id.Name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, URIs: []*url.URL{id.URI()}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der := create(t, tmpl, ca.cert, key, ca.signer)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(ca.dir, id.DC+"-"+string(id.Role)+"-"+id.Name)
	return mtls.Files{Cert: writePEM(t, base+".pem", "CERTIFICATE", der),
		Key: writePEM(t, base+"-key.pem", "EC PRIVATE KEY", keyDER), CA: ca.File}
}

func writePEM(t testing.TB, path, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
