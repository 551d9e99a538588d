// Package mtlstest writes throwaway PKIs for tests of mutual TLS links: a
// CA and one loopback certificate signed by it, which every member of a
// test cluster or federation presents as server and as client.
//
// WritePKI writes one shared certificate without identity, for links
// that need TLS only; NewCA issues identity certificates
// (kvr://<dc>/<role>/<name>) for links that authorize their peers.
//
// Guarantees: the certificate is valid for 127.0.0.1 for an hour around
// the time of the call, for server and client authentication. It refuses
// nothing: it is test support, and a failure fails the test.
//
// Concurrency: WritePKI is safe for concurrent use with distinct
// directories.
package mtlstest
