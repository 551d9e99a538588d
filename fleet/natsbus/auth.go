package natsbus

import (
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// ClientAuth is how a process authenticates to a NATS server and verifies
// it. At most one of CredsFile, NKeySeedFile, User and Token is set; TLS
// client certificates may be added to any of them. Its values are
// credentials or paths to them: nothing here is ever logged (see Method).
type ClientAuth struct {
	// CredsFile is a NATS .creds file (a user JWT and its nkey seed), for a
	// server in operator (decentralised JWT) mode.
	CredsFile string
	// NKeySeedFile is a file holding a user nkey seed (SU…); the server
	// knows the matching public key.
	NKeySeedFile string
	// User and Password authenticate by user name and password.
	User, Password string
	// Token authenticates with a bearer token.
	Token string
	// TLSCert and TLSKey are a PEM client certificate and its key, for a
	// server that verifies clients (or maps certificates to users); TLSCA
	// is the PEM CA that signs the server's certificate (default: the
	// system's roots). Any of them makes the connection use TLS.
	TLSCert, TLSKey, TLSCA string
}

// Method names the authentication in use, for logs: "creds", "nkey",
// "user", "token" or "none", with "+tls-cert" when a client certificate
// is presented. It never includes a credential.
func (a ClientAuth) Method() string {
	m := "none"
	switch {
	case a.CredsFile != "":
		m = "creds"
	case a.NKeySeedFile != "":
		m = "nkey"
	case a.User != "":
		m = "user"
	case a.Token != "":
		m = "token"
	}
	if a.TLSCert != "" {
		m += "+tls-cert"
	}
	return m
}

// tls reports whether the connection must use TLS.
func (a ClientAuth) tls() bool { return a.TLSCert != "" || a.TLSCA != "" }

// Validate checks that the options go together and that the files exist;
// errors name the option, never its value when that is a secret.
func (a ClientAuth) Validate() error {
	n := 0
	for _, set := range []bool{a.CredsFile != "", a.NKeySeedFile != "", a.User != "", a.Token != ""} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return fmt.Errorf("%w: nats_creds, nats_nkey_seed, nats_user and nats_token exclude each other", ErrConfig)
	case a.Password != "" && a.User == "":
		return fmt.Errorf("%w: nats_password needs nats_user", ErrConfig)
	case (a.TLSCert == "") != (a.TLSKey == ""):
		return fmt.Errorf("%w: nats_tls_cert and nats_tls_key go together", ErrConfig)
	case strings.ContainsAny(a.Token+a.User+a.Password, " \t\r\n"):
		return fmt.Errorf("%w: nats_user, nats_password or nats_token holds white space", ErrConfig)
	}
	for _, f := range []struct{ opt, path string }{
		{"nats_creds", a.CredsFile}, {"nats_nkey_seed", a.NKeySeedFile},
		{"nats_tls_cert", a.TLSCert}, {"nats_tls_key", a.TLSKey}, {"nats_tls_ca", a.TLSCA},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrConfig, f.opt, err)
		}
	}
	return nil
}

// options turns the authentication into connection options.
func (a ClientAuth) options() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case a.CredsFile != "":
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	case a.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(a.NKeySeedFile)
		if err != nil {
			// The error may quote the file's content: keep it out.
			return nil, fmt.Errorf("%w: nats_nkey_seed %s holds no user nkey seed", ErrConfig, a.NKeySeedFile)
		}
		opts = append(opts, o)
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	}
	if a.TLSCert != "" {
		opts = append(opts, nats.ClientCert(a.TLSCert, a.TLSKey))
	}
	if a.TLSCA != "" {
		opts = append(opts, nats.RootCAs(a.TLSCA))
	}
	if a.tls() {
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}
