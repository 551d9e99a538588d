package security

import (
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// TestClusterForgedApplyIsRefused: a raft command sent to the forwarding
// service by anyone but a member forwarding its own proposal is refused
// (the finding: anyone could drop and plant bindings, remove engines),
// the log does not grow, and each attempt is counted by reason.
func TestClusterForgedApplyIsRefused(t *testing.T) {
	ca := mtlstest.NewCA(t, t.TempDir())
	other := mtlstest.NewCA(t, t.TempDir())
	operator := ptr(ca.Issue(t, ident("dc1", mtls.RoleOperator, "ops")))
	n1 := newMember(t, "dc1", "n1")
	n1.tls = ptr(ca.Issue(t, ident("dc1", mtls.RoleMember, "n1")))
	n1.bootstrap(t, operator)
	cmd, err := consensus.Encode(&kvrpb.RaftRemoveWorker{EngineId: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := n1.status(t, operator).GetLastLogIndex()
	tests := []struct {
		name   string
		files  *mtls.Files
		mark   string
		labels []string
	}{
		{name: "no client certificate", files: &mtls.Files{CA: ca.File},
			labels: []string{`link="cluster_api"`, `reason="no_certificate"`}},
		{name: "certificate of another CA", files: trusting(other.Issue(t, ident("dc1", mtls.RoleMember, "n1")), ca),
			labels: []string{`link="cluster_api"`, `reason="untrusted_certificate"`}},
		{name: "relay forging a member's mark", files: ptr(ca.Issue(t, ident("dc1", mtls.RoleRelay, "r1"))), mark: "n1",
			labels: []string{`link="raft_forward"`, `reason="wrong_role"`}},
		{name: "operator proposing", files: operator,
			labels: []string{`link="raft_forward"`, `reason="not_member"`}},
		{name: "member certificate of a non-member", files: ptr(ca.Issue(t, ident("dc1", mtls.RoleMember, "n9"))), mark: "n9",
			labels: []string{`link="raft_forward"`, `reason="not_member"`}},
		{name: "member of another dc", files: ptr(ca.Issue(t, ident("dc2", mtls.RoleMember, "n1"))), mark: "n1",
			labels: []string{`link="cluster_api"`, `reason="wrong_dc"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			if tc.mark != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "x-kvr-forwarded", tc.mark)
			}
			_, err := kvrpb.NewRaftForwardClient(dial(t, n1.api, tc.files)).Apply(ctx, &kvrpb.RaftApplyRequest{Command: cmd})
			if err == nil {
				t.Fatal("a forged command was applied")
			}
			if got := metric(n1.metrics(), "kvrouter_security_refusals_total", tc.labels...); got < 1 {
				t.Fatalf("refusal not counted (%v): %v", tc.labels, got)
			}
		})
	}
	if after := n1.status(t, operator).GetLastLogIndex(); after != before {
		t.Fatalf("raft log grew from %d to %d under forged commands", before, after)
	}
}

// trusting is f with ca's certificate as the CA the client trusts.
func trusting(f mtls.Files, ca *mtlstest.CA) *mtls.Files {
	f.CA = ca.File
	return &f
}
