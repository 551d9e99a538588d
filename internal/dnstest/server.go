package dnstest

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// Serve answers every question with answer(question) on a loopback UDP
// port until the test ends, and returns the server's address.
func Serve(t testing.TB, answer func(q dns.Question) []dns.RR) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		for _, q := range req.Question {
			m.Answer = append(m.Answer, answer(q)...)
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}
