package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClusterTLS loads the cluster network's mutual TLS: this member's
// certificate and key, and the CA that signs every member's certificate.
// The server side requires and verifies a client certificate from that
// CA; the client side verifies the server against it. The same files
// serve raft's transport, the cluster API and `kvrouter cluster`.
func ClusterTLS(certFile, keyFile, caFile string) (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: cluster_tls_cert/cluster_tls_key: %v", ErrConfig, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: cluster_tls_ca: %v", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("%w: cluster_tls_ca %s: no PEM certificate", ErrConfig, caFile)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// tlsEnabled reports whether any cluster TLS file is set; validate
// requires all three together.
func (c *ClusterConfig) tlsEnabled() bool {
	return c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != ""
}
