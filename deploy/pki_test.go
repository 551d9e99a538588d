package deploy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA stands in for cert-manager: it signs the certificates the
// manifests' Certificate objects and csi-driver volumes ask for, with
// their names and usages.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte
	serial int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kvrouter-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// certNames are what a certificate is issued for: its DNS names, its URI
// SANs (kvr://<dc>/<role>/<name>) and its extended key usages.
type certNames struct {
	dns    []string
	uris   []string
	usages []x509.ExtKeyUsage
}

// files are where a TLS Secret or a csi-driver volume puts the
// certificate, its key and the CA.
type files struct{ cert, key, ca string }

var secretFiles = files{cert: "tls.crt", key: "tls.key", ca: "ca.crt"}

// issue writes a certificate for n, its key and the CA into dir, as
// cert-manager fills a TLS Secret (tls.crt, tls.key, ca.crt) or
// csi-driver a volume.
func (ca *testCA) issue(t *testing.T, dir string, n certNames, f files) {
	t.Helper()
	ca.serial++
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial),
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: n.dns,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: n.usages}
	for _, s := range n.uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("uri SAN %q: %v", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	if len(n.dns) > 0 {
		tmpl.Subject.CommonName = n.dns[0]
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, f.cert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, filepath.Join(dir, f.key), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	writeFile(t, filepath.Join(dir, f.ca), ca.pem)
}

// extKeyUsages maps cert-manager's usage names to x509's extended key
// usages; the other usages (digital signature, key encipherment) are key
// usages every issued certificate has here.
var extKeyUsages = map[string]x509.ExtKeyUsage{
	"server auth": x509.ExtKeyUsageServerAuth,
	"client auth": x509.ExtKeyUsageClientAuth,
}

// usagesOf reads cert-manager usage names; an unknown one fails the test.
func usagesOf(t *testing.T, names []string) []x509.ExtKeyUsage {
	t.Helper()
	var out []x509.ExtKeyUsage
	for _, n := range names {
		n = strings.TrimSpace(n)
		if u, ok := extKeyUsages[n]; ok {
			out = append(out, u)
			continue
		}
		if n != "digital signature" && n != "key encipherment" {
			t.Fatalf("usage %q is not one of cert-manager's", n)
		}
	}
	return out
}

// namesOf are the names a Certificate object asks for.
func namesOf(t *testing.T, c *certificate) certNames {
	t.Helper()
	usages := c.Spec.Usages
	if len(usages) == 0 { // cert-manager's default
		usages = []string{"digital signature", "key encipherment"}
	}
	return certNames{dns: c.Spec.DNSNames, uris: c.Spec.URIs, usages: usagesOf(t, usages)}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
