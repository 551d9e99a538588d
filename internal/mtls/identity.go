package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// IdentityScheme is the scheme of the URI SAN that names a kvrouter
// identity: kvr://<dc>/<role>/<name>.
const IdentityScheme = "kvr"

// Role is what an identity may do; each link accepts some roles only.
type Role string

// Roles.
const (
	// RoleMember is a router node of a DC's raft cluster.
	RoleMember Role = "member"
	// RoleRelay is a DC's relay: it follows its cluster's ownership stream
	// and subscribes to the peer DCs' relays.
	RoleRelay Role = "relay"
	// RoleOperator changes membership and reads the cluster's status.
	RoleOperator Role = "operator"
)

// Identity is the holder of a certificate, as its kvr:// URI SAN says.
type Identity struct {
	DC   string
	Role Role
	Name string
}

// String is the identity's URI.
func (id Identity) String() string { return id.URI().String() }

// URI is the SAN that names the identity in a certificate.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: IdentityScheme, Host: id.DC, Path: "/" + string(id.Role) + "/" + id.Name}
}

// ErrNoIdentity reports a certificate that names no kvrouter identity.
var ErrNoIdentity = errors.New("certificate carries no kvr://<dc>/<role>/<name> URI SAN")

// IdentityOf reads the one kvr:// identity of cert. A certificate with
// none, or with two (which would let one key speak for two holders), has
// no identity.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	if cert == nil {
		return Identity{}, Refuse(ReasonNoCertificate, "no certificate")
	}
	var out []Identity
	for _, u := range cert.URIs {
		if u.Scheme != IdentityScheme {
			continue
		}
		role, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		if !ok || u.Host == "" || name == "" || strings.Contains(name, "/") {
			return Identity{}, fmt.Errorf("%w: malformed %s", ErrNoIdentity, u)
		}
		out = append(out, Identity{DC: u.Host, Role: Role(role), Name: name})
	}
	if len(out) != 1 {
		return Identity{}, fmt.Errorf("%w (found %d)", ErrNoIdentity, len(out))
	}
	return out[0], nil
}

// PeerIdentity is the identity of a gRPC call's verified client
// certificate; ok is false on a plaintext connection or without an
// identity.
func PeerIdentity(ctx context.Context) (Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return Identity{}, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return Identity{}, false
	}
	id, err := IdentityOf(info.State.PeerCertificates[0])
	return id, err == nil
}

// Refusal reasons, the reason label of the refusal counters.
const (
	ReasonNoCertificate = "no_certificate"
	ReasonUntrusted     = "untrusted_certificate"
	ReasonNoIdentity    = "no_identity"
	ReasonWrongRole     = "wrong_role"
	ReasonWrongDC       = "wrong_dc"
	ReasonWrongName     = "wrong_name"
)

// RefusedError is a refused identity with its reason label.
type RefusedError struct {
	Reason string
	Msg    string
}

func (e *RefusedError) Error() string { return e.Msg }

// Refuse returns a RefusedError.
func Refuse(reason, format string, args ...any) error {
	return &RefusedError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Accept decides whether an identity may use a link; a refusal should be
// a *RefusedError, whose reason is counted.
type Accept func(Identity) error

// AcceptRoles accepts the given roles of one DC; an empty dc accepts any.
func AcceptRoles(dc string, roles ...Role) Accept {
	return func(id Identity) error {
		if dc != "" && id.DC != dc {
			return Refuse(ReasonWrongDC, "%s is not of dc %s", id, dc)
		}
		for _, r := range roles {
			if id.Role == r {
				return nil
			}
		}
		return Refuse(ReasonWrongRole, "%s: role %s not accepted here (want %v)", id, id.Role, roles)
	}
}

// Guard returns a copy of server that verifies each client's certificate
// chain itself and accepts only identities accept allows; every refusal,
// a missing certificate included, is passed to refused with its reason
// before the handshake fails. Verifying in one callback, instead of
// letting crypto/tls refuse a missing or foreign certificate first, is
// what lets every refusal be counted.
func Guard(server *tls.Config, accept Accept, refused func(reason string)) *tls.Config {
	g := server.Clone()
	pool := g.ClientCAs
	g.ClientAuth = tls.RequestClientCert
	g.VerifyConnection = func(cs tls.ConnectionState) error {
		err := verifyClient(cs, pool, accept)
		if err != nil && refused != nil {
			refused(reasonOf(err))
		}
		return err
	}
	return g
}

// verifyClient verifies the client chain against pool and its identity.
func verifyClient(cs tls.ConnectionState, pool *x509.CertPool, accept Accept) error {
	if len(cs.PeerCertificates) == 0 {
		return Refuse(ReasonNoCertificate, "client presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return Refuse(ReasonUntrusted, "client certificate: %v", err)
	}
	return checkIdentity(leaf, accept)
}

func checkIdentity(leaf *x509.Certificate, accept Accept) error {
	id, err := IdentityOf(leaf)
	if err != nil {
		return Refuse(ReasonNoIdentity, "%v", err)
	}
	return accept(id)
}

// VerifyServer returns a copy of client that also requires the server's
// (already chain-verified) certificate to name an identity accept allows.
func VerifyServer(client *tls.Config, accept Accept) *tls.Config {
	c := client.Clone()
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return Refuse(ReasonNoCertificate, "server presented no certificate")
		}
		return checkIdentity(cs.PeerCertificates[0], accept)
	}
	return c
}

// reasonOf is err's refusal reason.
func reasonOf(err error) string {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Reason
	}
	return ReasonUntrusted
}
