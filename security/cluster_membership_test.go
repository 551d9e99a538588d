package security

import (
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// TestClusterMembershipNeedsOperator: joining and removing members needs
// an operator credential (the finding: anyone added a dead voter and
// removed a real member). A node with a valid member certificate but no
// token is refused and stops; a leave by a relay, or with a wrong token,
// is refused; each is counted. The token does admit a member, and the
// operator's certificate removes it.
func TestClusterMembershipNeedsOperator(t *testing.T) {
	ca := mtlstest.NewCA(t, t.TempDir())
	operator := ptr(ca.Issue(t, ident("dc1", mtls.RoleOperator, "ops")))
	token := writeToken(t, "correct-horse")
	n1 := newMember(t, "dc1", "n1")
	n1.tls = ptr(ca.Issue(t, ident("dc1", mtls.RoleMember, "n1")))
	n1.bootstrap(t, operator, "--cluster-join-token-file", token)

	n2 := newMember(t, "dc1", "n2")
	n2.tls = ptr(ca.Issue(t, ident("dc1", mtls.RoleMember, "n2")))
	n2.p = start(t, "n2 without token", n2.args(t, "--join", n1.api)...)
	err, ok := n2.p.exited(15 * time.Second)
	if !ok || err == nil || !strings.Contains(n2.p.out.String(), "PermissionDenied") {
		t.Fatalf("a join without the token was not refused (exited %v: %v)", ok, err)
	}
	if got := metric(n1.metrics(), "kvrouter_security_refusals_total", `link="cluster_join"`, `reason="no_credential"`); got < 1 {
		t.Fatalf("refused join not counted: %v", got)
	}

	relay := ptr(ca.Issue(t, ident("dc1", mtls.RoleRelay, "r1")))
	if _, err := dialAdmin(t, n1.api, relay).Leave(ctxFor(t), &kvrpb.AdminLeaveRequest{Id: "n1"}); err == nil {
		t.Fatal("a relay removed a member")
	}
	if _, err := dialAdmin(t, n1.api, n2.tls).Leave(withToken(ctxFor(t), "guess"), &kvrpb.AdminLeaveRequest{Id: "n1"}); err == nil {
		t.Fatal("a wrong token removed a member")
	}
	for _, reason := range []string{"no_credential", "bad_credential"} {
		if got := metric(n1.metrics(), "kvrouter_security_refusals_total", `link="cluster_leave"`, `reason="`+reason+`"`); got < 1 {
			t.Fatalf("refused leave (%s) not counted: %v", reason, got)
		}
	}

	n3 := newMember(t, "dc1", "n3")
	n3.tls = ptr(ca.Issue(t, ident("dc1", mtls.RoleMember, "n3")))
	n3.p = start(t, "n3 with token", n3.args(t, "--join", n1.api, "--cluster-join-token-file", token)...)
	waitFor(t, 20*time.Second, "n3 a member", func() bool { return len(n1.status(t, operator).GetMembers()) == 2 })
	if _, err := dialAdmin(t, n1.api, operator).Leave(ctxFor(t), &kvrpb.AdminLeaveRequest{Id: "n3"}); err != nil {
		t.Fatalf("the operator's leave: %v", err)
	}
	if got := len(n1.status(t, operator).GetMembers()); got != 1 {
		t.Fatalf("%d members after the operator's leave, want 1", got)
	}
}
