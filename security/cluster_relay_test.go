package security

import (
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
	"github.com/kvrouter/kvrouter/routing"
)

// TestRelayRefusesUnauthenticatedSubscribers: the relay's publication
// port streams the DC's prefix filter, load and session summary to the
// peer DCs' relays only (the finding: to anyone). A subscriber without a
// certificate, with its own DC's relay certificate, or with a member's,
// is refused and counted; a peer DC's relay is served.
func TestRelayRefusesUnauthenticatedSubscribers(t *testing.T) {
	ca := mtlstest.NewCA(t, t.TempDir())
	n1 := newMember(t, "dc1", "n1")
	n1.tls = ptr(ca.Issue(t, ident("dc1", mtls.RoleMember, "n1")))
	nats := freeAddr(t)
	n1.bootstrap(t, ptr(ca.Issue(t, ident("dc1", mtls.RoleOperator, "ops"))), "--nats-listen", nats)
	relayCert := ca.Issue(t, ident("dc1", mtls.RoleRelay, "relay-dc1"))
	gateway, pub := freeAddr(t), freeAddr(t)
	start(t, "relay", "relay", "--dc", "dc1", "--nats", "nats://"+nats, "--nodes", "http://"+n1.http,
		"--cluster-apis", n1.api, "--gateway-addr", gateway, "--publish-addr", pub,
		"--peer-dcs", "dc2="+freeAddr(t)+"/"+freeAddr(t)+"/10ms",
		"--cluster-tls-cert", relayCert.Cert, "--cluster-tls-key", relayCert.Key, "--cluster-tls-ca", relayCert.CA,
		"--wan-tls-cert", relayCert.Cert, "--wan-tls-key", relayCert.Key, "--wan-tls-ca", relayCert.CA)
	metrics := "http://" + gateway + "/metrics"
	waitFor(t, 20*time.Second, "the relay serving", func() bool { return metric(metrics, "kvrouter_security_refusals_total") >= 0 })

	pool := producer.PoolID{DC: "dc1", Domain: producer.Domain{Model: mocker.DefaultModel, BlockSize: mocker.DefaultBlockSize,
		HashScheme: producer.HashSchemeXXH3Chain, HashSeed: routing.HashSeed}}
	tests := []struct {
		name   string
		files  *mtls.Files
		reason string
	}{
		{name: "no certificate", files: &mtls.Files{CA: ca.File}, reason: "no_certificate"},
		{name: "its own dc's relay", files: &relayCert, reason: "wrong_dc"},
		{name: "a peer dc's member", files: ptr(ca.Issue(t, ident("dc2", mtls.RoleMember, "n1"))), reason: "wrong_role"},
		{name: "a peer dc's relay", files: ptr(ca.Issue(t, ident("dc2", mtls.RoleRelay, "relay-dc2")))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := publish.Subscribe(ctxFor(t), kvrpb.NewRelayClient(dial(t, pub, tc.files)), publish.Request{Pool: pool, SubscriberID: "probe"})
			if err == nil {
				_, err = s.Recv()
				s.Close()
			}
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("a peer's relay was refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the summary was streamed to an unauthenticated subscriber")
			}
			if got := metric(metrics, "kvrouter_security_refusals_total", `link="relay_publish"`, `reason="`+tc.reason+`"`); got < 1 {
				t.Fatalf("refusal not counted: %v", got)
			}
		})
	}
}
