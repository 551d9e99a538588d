// Package dnstest serves DNS answers on loopback for tests of engine
// discovery: a real DNS server (github.com/miekg/dns) that a resolver, or
// a process's --engine-dns-server, can be pointed at. It is imported by
// tests only.
package dnstest
