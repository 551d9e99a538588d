package oaiedge

import (
	"context"
	"fmt"
	"net"
	"net/http"
)

// Scope is who a route is for.
type Scope uint8

const (
	// ScopeAPI routes are the OpenAI API: clients, with a client key
	// when keys are configured.
	ScopeAPI Scope = iota
	// ScopeAdmin routes read or change the router's state (sessions,
	// metrics, explain): operators only.
	ScopeAdmin
)

// String is the scope's metric label.
func (s Scope) String() string {
	if s == ScopeAdmin {
		return "admin"
	}
	return "api"
}

// Refusal reasons, the reason label of the refusals metric.
const (
	// ReasonMissing: no credential was presented.
	ReasonMissing = "missing"
	// ReasonInvalid: the credential matches no key.
	ReasonInvalid = "invalid"
	// ReasonNotOperator: a client key was presented on an admin route.
	ReasonNotOperator = "not_operator"
	// ReasonClosed: an admin route on a listener that is not loopback,
	// with no operator credential configured.
	ReasonClosed = "closed"
)

// Access is an edge's access control.
//
// API routes are open while Clients is empty; otherwise they need a
// client key or an operator token as "Authorization: Bearer". Admin
// routes need an operator credential: one of Operators as a bearer
// token, or, with OperatorCerts, a TLS client certificate the listener
// verified. With no operator credential configured at all, admin routes
// are served on loopback listeners only (today's demos need no flags)
// and refused elsewhere: an edge bound to a routable address never
// exposes its admin routes to anyone who can reach it.
//
// Refusals are 401 (no credential, or a wrong one; with
// WWW-Authenticate: Bearer) or 403 (a client key on an admin route, or
// an admin route closed on this listener), in the OpenAI error shape.
// The credential never appears in a message, a log or a metric.
type Access struct {
	Clients, Operators Keys
	// OperatorCerts makes a verified TLS client certificate an operator
	// credential; the listener's tls.Config says which CA verifies it.
	OperatorCerts bool
	// Refused, when set, is called on every refusal with the scope and
	// the reason, for the refusals metric.
	Refused func(scope Scope, reason string)
}

// Guard wraps h with the scope's check, answering refusals from t.
func (a *Access) Guard(t Table, scope Scope, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if reason, err := a.check(scope, r); err != nil {
			if a.Refused != nil {
				a.Refused(scope, reason)
			}
			if status := t.Classify(err).Status; status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="kvrouter"`)
			}
			t.Write(w, err)
			return
		}
		h(w, r)
	}
}

// check decides one request; it returns the refusal's reason and error.
func (a *Access) check(scope Scope, r *http.Request) (string, error) {
	cred := BearerToken(r.Header)
	if scope == ScopeAPI {
		switch {
		case a.Clients.Len() == 0 || a.Clients.Match(cred) || a.Operators.Match(cred):
			return "", nil
		case cred == "":
			return ReasonMissing, &Error{Kind: ErrUnauthenticated, Msg: "this API needs a key: send it as Authorization: Bearer <key>"}
		}
		return ReasonInvalid, &Error{Kind: ErrUnauthenticated, Msg: "the API key is not valid"}
	}
	switch {
	case a.OperatorCerts && r.TLS != nil && len(r.TLS.VerifiedChains) > 0:
		return "", nil
	case a.Operators.Match(cred):
		return "", nil
	case a.Operators.Len() == 0 && !a.OperatorCerts:
		if OnLoopback(r) {
			return "", nil
		}
		return ReasonClosed, &Error{Kind: ErrForbidden,
			Msg: "admin routes are served on loopback listeners only unless an operator credential is configured"}
	case cred == "":
		return ReasonMissing, &Error{Kind: ErrUnauthenticated, Msg: "this route needs an operator credential"}
	case a.Clients.Match(cred):
		return ReasonNotOperator, &Error{Kind: ErrForbidden, Msg: "this route needs an operator credential, not an API key"}
	}
	return ReasonInvalid, &Error{Kind: ErrUnauthenticated, Msg: "the operator credential is not valid"}
}

// listenerKey marks a connection's listener as loopback or not.
type listenerKey struct{}

// ConnContext is an http.Server.ConnContext that records whether ln, the
// listener the server serves, is bound to a loopback address, for
// OnLoopback.
func ConnContext(ln net.Listener) func(context.Context, net.Conn) context.Context {
	loop := isLoopback(ln.Addr())
	return func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, listenerKey{}, loop)
	}
}

// OnLoopback reports whether r came through a loopback listener: the
// listener's address when its server set ConnContext, else the address
// the connection was accepted on (a call in process, with no connection,
// counts as loopback). The listener's address decides where
// it is known because a listener on 0.0.0.0 is reachable from outside
// even by a connection that happens to arrive over loopback (a sidecar
// proxy's, for one).
func OnLoopback(r *http.Request) bool {
	if loop, ok := r.Context().Value(listenerKey{}).(bool); ok {
		return loop
	}
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		// No connection at all: the handler was called in process.
		return true
	}
	return isLoopback(addr)
}

// isLoopback reports a TCP address on a loopback IP.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// AccessConfig is the configuration of an edge's Access, the same for
// router nodes and gateways.
type AccessConfig struct {
	// APIKeys, and the keys of APIKeyFile (one per line), are the client
	// keys; with none the API is open.
	APIKeys    []string
	APIKeyFile string
	// OperatorTokens, and those of OperatorTokenFile, are the operator
	// bearer credentials of the admin routes.
	OperatorTokens    []string
	OperatorTokenFile string
	// OperatorCA is a PEM file of the CA whose client certificates are
	// operator credentials; the edge's TLS listener asks for them (and
	// verifies them against it) when it is set.
	OperatorCA string
}

// Build reads the key files and returns the Access; errors name the
// option, never a key.
func (c AccessConfig) Build() (*Access, error) {
	clients, err := keySet("api_key", c.APIKeys, c.APIKeyFile)
	if err != nil {
		return nil, err
	}
	operators, err := keySet("operator_token", c.OperatorTokens, c.OperatorTokenFile)
	if err != nil {
		return nil, err
	}
	return &Access{Clients: clients, Operators: operators, OperatorCerts: c.OperatorCA != ""}, nil
}

// keySet builds the keys of one option and its file.
func keySet(option string, keys []string, file string) (Keys, error) {
	all := append([]string(nil), keys...)
	if file != "" {
		more, err := ReadKeyFile(file)
		if err != nil {
			return Keys{}, fmt.Errorf("%s_file: %w", option, err)
		}
		if len(more) == 0 {
			return Keys{}, fmt.Errorf("%w: %s_file %s holds no key", ErrKeys, option, file)
		}
		all = append(all, more...)
	}
	k, err := NewKeys(all...)
	if err != nil {
		return Keys{}, fmt.Errorf("%s: %w", option, err)
	}
	return k, nil
}
