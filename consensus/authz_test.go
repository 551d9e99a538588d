package consensus

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// TestForwardRefusesNonMembers: the forwarding service applies only a
// member's forwarded proposal; a client's command, and one whose mark
// names a non-member, are refused before anything is proposed, and
// counted.
func TestForwardRefusesNonMembers(t *testing.T) {
	c := newClusterWith(t, 3, nil)
	cmd, err := Encode(&kvrpb.RaftRemoveWorker{EngineId: 7})
	if err != nil {
		t.Fatal(err)
	}
	// The log and the forward target are the leader's: a leader change
	// mid-check (a loaded machine) appends the new leader's own entries,
	// so the check is repeated until one leadership held throughout.
	waittest.UntilNil(t, time.Minute, "the checks ran under one leadership", func() error {
		l := c.leader()
		term := c.nodes[l].Raft().CurrentTerm()
		held := func() bool { return c.nodes[l].Ready() && c.nodes[l].Raft().CurrentTerm() == term }
		sec := metrics.NewSecurity(nil)
		c.nodes[l].sec = sec
		tests := []struct {
			name string
			from string
			code codes.Code
		}{
			{name: "client without mark", code: codes.PermissionDenied},
			{name: "mark naming a non-member", from: "rogue", code: codes.PermissionDenied},
			{name: "a member's forwarding", from: c.nodes[(l+1)%3].ID(), code: codes.OK},
		}
		before := c.nodes[l].Raft().LastIndex()
		for _, tc := range tests {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a failure bound
			if tc.from != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, forwardedKey, tc.from)
			}
			_, err := kvrpb.NewRaftForwardClient(c.dialAPI(t, l)).Apply(ctx, &kvrpb.RaftApplyRequest{Command: cmd})
			cancel()
			if status.Code(err) != tc.code {
				if !held() {
					return fmt.Errorf("%s: %v during a leader change", tc.name, err)
				}
				t.Fatalf("%s: Apply: %v, want %s", tc.name, err, tc.code)
			}
		}
		after := c.nodes[l].Raft().LastIndex()
		if !held() {
			return fmt.Errorf("leadership of term %d moved during the checks", term)
		}
		if got := testutil.ToFloat64(sec.Refusals.WithLabelValues(linkForward, reasonNotMember)); got != 2 {
			t.Fatalf("refusals counted %v, want 2", got)
		}
		if after != before+1 {
			t.Fatalf("log grew from %d to %d: only the member's proposal belongs there", before, after)
		}
		return nil
	})
}

// TestLeaveNeedsOperatorCredential: with a join token configured, a leave
// without it or with a wrong one is refused, and the member stays.
func TestLeaveNeedsOperatorCredential(t *testing.T) {
	c := newClusterWith(t, 3, func(cfg *Config) { cfg.Auth.JoinToken = "s3cret" })
	l := c.leader()
	victim := c.nodes[(l+1)%3].ID()
	for _, tc := range []struct {
		name, token string
		code        codes.Code
	}{
		{name: "no token", code: codes.PermissionDenied},
		{name: "wrong token", token: "guess", code: codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a failure bound
			defer cancel()
			if tc.token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, JoinTokenKey, tc.token)
			}
			_, err := kvrpb.NewClusterAdminClient(c.dialAPI(t, l)).Leave(ctx, &kvrpb.AdminLeaveRequest{Id: victim})
			if status.Code(err) != tc.code {
				t.Fatalf("Leave: %v, want %s", err, tc.code)
			}
		})
	}
	if _, ok := c.nodes[l].memberAddr(victim); !ok {
		t.Fatalf("%s was removed without a credential", victim)
	}
}

// dialAPI is a plaintext client of node i's cluster API.
func (c *testCluster) dialAPI(t *testing.T, i int) *grpc.ClientConn {
	t.Helper()
	lis := c.lis[apiName(i)]
	cc, err := grpc.NewClient("passthrough:///"+apiName(i), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func apiName(i int) string { return fmt.Sprintf("api-%d", i) }
