// Package mtls loads the mutual TLS configurations of kvrouter's internal
// links from PEM files: a member's certificate and key, and the CA that
// signs every member's certificate. The router cluster (raft and the
// cluster API) and the relays' summary publication between DCs use it,
// each with its own files.
//
// Guarantees. The server configuration requires and verifies a client
// certificate signed by the CA; the client configuration presents the same
// certificate and verifies the server against the CA (the server name is
// the dialled host, so certificates carry the members' addresses or
// names). Both require TLS 1.3. Errors name the configuration keys of the
// files, as "<prefix>_cert", "<prefix>_key" and "<prefix>_ca".
//
// Identities. A certificate names its holder in one URI SAN,
// kvr://<dc>/<role>/<name> (roles: member, relay, operator). Guard makes a
// server configuration verify each client's chain and identity itself and
// report every refusal with a reason label (no_certificate,
// untrusted_certificate, no_identity, wrong_role, wrong_dc, wrong_name),
// so that each link counts who it turned away; VerifyServer makes a
// client check the identity of the server it dialled. PeerIdentity reads
// the verified identity of a gRPC call.
//
// Reloading. Every configuration of Load, and the client-facing
// certificates of the edges, present their certificate through a Reloader
// (reload.go): files rewritten in place are served from the next
// handshake (checked at most once a second), and a pair that fails to
// load leaves the previous one in use.
//
// What it refuses to do: the CA file is read once (a new CA needs a
// restart), and it does not accept a CA bundle without a certificate.
//
// Concurrency. Load is safe for concurrent use; the configurations it
// returns are shared read-only by every connection.
package mtls
