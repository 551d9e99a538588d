package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// registerEdges registers the options of the node's HTTP edge: client
// keys, operator credentials, the admin listener and the session keys.
func (f *nodeFlags) registerEdges(fs *pflag.FlagSet) {
	registerEdgeFlags(fs, &f.cfg.Frontend.Edge.AccessConfig, &f.cfg.Frontend.Edge.SessionKeys, &f.cfg.Frontend.Edge.AdminAddr)
}

// registerEdgeFlags registers the edge options a router node and a
// relay's gateway share, with the same names and meaning.
func registerEdgeFlags(fs *pflag.FlagSet, a *oaiedge.AccessConfig, k *oaiedge.SessionKeys, adminAddr *string) {
	fs.StringArrayVar(&a.APIKeys, "api-key", nil, "client key required on the OpenAI API as Authorization: Bearer (repeatable; prefer --api-key-file or KVR_API_KEY, ';'-separated: flags show in process lists); none: the API is open")
	fs.StringVar(&a.APIKeyFile, "api-key-file", "", "file of client keys, one per line (# comments)")
	fs.StringArrayVar(&a.OperatorTokens, "operator-token", nil, "operator bearer token of the admin routes (sessions, /metrics, /v1/route/explain; repeatable; prefer --operator-token-file); with none and no --operator-ca, admin routes answer on loopback listeners only")
	fs.StringVar(&a.OperatorTokenFile, "operator-token-file", "", "file of operator tokens, one per line (# comments)")
	fs.StringVar(&a.OperatorCA, "operator-ca", "", "PEM CA whose client certificates are operator credentials on the TLS listener")
	fs.StringVar(adminAddr, "admin-addr", "", "serve /metrics and /v1/route/explain (and the session routes) on this separate address instead of the client-facing one")
	fs.StringSliceVar(&k.Headers, "session-header", oaiedge.DefaultSessionHeaders, "headers naming the session id, first present wins (router nodes and gateways must agree)")
	fs.StringSliceVar(&k.BodyFields, "session-body-field", oaiedge.DefaultSessionBodyFields, "body fields naming the session id when no header does: prompt_cache_key, user (empty: none)")
}
