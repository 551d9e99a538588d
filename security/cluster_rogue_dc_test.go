package security

import (
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// TestClusterRogueDCCannotJoin: a node of another DC never joins (the
// finding: a rogue --dc node joined and received every binding). On a
// plaintext loopback cluster, where membership is otherwise open to local
// callers, the join's DC is refused, and an operator's join that does not
// name a DC is refused when the leader asks the node itself. Over mutual
// TLS a certificate of another DC is refused at the handshake.
func TestClusterRogueDCCannotJoin(t *testing.T) {
	n1 := newMember(t, "dc1", "n1")
	n1.bootstrap(t, nil)

	rogue := newMember(t, "dc2", "rogue")
	rogue.p = start(t, "rogue joining", rogue.args(t, "--join", n1.api)...)
	if err, ok := rogue.p.exited(15 * time.Second); !ok || err == nil || !strings.Contains(rogue.p.out.String(), "dc2") {
		t.Fatalf("a node of dc2 was not refused (exited %v: %v)", ok, err)
	}

	other := newMember(t, "dc2", "rogue2")
	other.bootstrap(t, nil)
	out, err := runCmd(t, "cluster", "join", "--addr", n1.api, "--id", other.id, "--raft-addr", other.raft, "--api-addr", other.api)
	if err == nil || !strings.Contains(out, "dc2") {
		t.Fatalf("an operator's join of a dc2 node succeeded: %v\n%s", err, out)
	}
	if got := metric(n1.metrics(), "kvrouter_security_refusals_total", `link="cluster_join"`, `reason="wrong_dc"`); got < 2 {
		t.Fatalf("refused joins counted %v, want 2", got)
	}
	if got := len(n1.status(t, nil).GetMembers()); got != 1 {
		t.Fatalf("%d members, want 1", got)
	}
}

// TestClusterRogueDCRefusedOverTLS: a client holding a member certificate
// of another DC, and the join token, is refused by the cluster API's
// handshake (counted) and never becomes a member. (A rogue kvrouter node
// stops even sooner: it refuses dc1's certificate itself.)
func TestClusterRogueDCRefusedOverTLS(t *testing.T) {
	ca := mtlstest.NewCA(t, t.TempDir())
	operator := ptr(ca.Issue(t, ident("dc1", mtls.RoleOperator, "ops")))
	token := writeToken(t, "t0ken")
	n1 := newMember(t, "dc1", "n1")
	n1.tls = ptr(ca.Issue(t, ident("dc1", mtls.RoleMember, "n1")))
	n1.bootstrap(t, operator, "--cluster-join-token-file", token)

	// A rogue node's own client refuses dc1's certificate before it
	// shows its own; this client presents the dc2 certificate regardless.
	rogue := ptr(ca.Issue(t, ident("dc2", mtls.RoleMember, "rogue")))
	_, err := dialAdmin(t, n1.api, rogue).Join(withToken(ctxFor(t), "t0ken"),
		&kvrpb.AdminJoinRequest{Id: "rogue", RaftAddr: freeAddr(t), ApiAddr: freeAddr(t), Dc: "dc1"})
	if err == nil {
		t.Fatal("a dc2 certificate joined dc1")
	}
	if got := metric(n1.metrics(), "kvrouter_security_refusals_total", `link="cluster_api"`, `reason="wrong_dc"`); got < 1 {
		t.Fatalf("refused handshake not counted: %v", got)
	}
	if got := len(n1.status(t, operator).GetMembers()); got != 1 {
		t.Fatalf("%d members, want 1", got)
	}
}
