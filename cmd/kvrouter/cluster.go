package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/node"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// clusterFlags are the options every `kvrouter cluster` subcommand shares.
type clusterFlags struct {
	addr                string
	timeout             time.Duration
	tlsCert, tlsKey, ca string
	tokenFile           string
}

// call runs fn against the member at --addr under --timeout.
func (f *clusterFlags) call(cmd *cobra.Command, fn func(ctx context.Context, c kvrpb.ClusterAdminClient) error) error {
	return f.connect(cmd, f.addr, f.timeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		return fn(ctx, kvrpb.NewClusterAdminClient(conn))
	})
}

// adminCmd is a subcommand that makes one call, fn, to the member at
// --addr.
func (f *clusterFlags) adminCmd(use, short string, fn func(context.Context, *cobra.Command, kvrpb.ClusterAdminClient) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		return f.call(cmd, func(ctx context.Context, c kvrpb.ClusterAdminClient) error { return fn(ctx, cmd, c) })
	}}
}

// status asks the member at --addr for its view of the cluster.
func (f *clusterFlags) status(cmd *cobra.Command) (*kvrpb.AdminStatusResponse, error) {
	var st *kvrpb.AdminStatusResponse
	err := f.call(cmd, func(ctx context.Context, c kvrpb.ClusterAdminClient) (err error) {
		if st, err = c.Status(ctx, &kvrpb.AdminStatusRequest{}); err != nil {
			return fmt.Errorf("status from %s: %w", f.addr, err)
		}
		return nil
	})
	return st, err
}

// connect dials addr with the cluster's credentials, checking that the
// server is a member, and runs fn under timeout with the operator's
// token.
func (f *clusterFlags) connect(cmd *cobra.Command, addr string, timeout time.Duration, fn func(context.Context, *grpc.ClientConn) error) error {
	if addr == "" {
		return errors.New("--addr: the cluster API address of a member is required")
	}
	creds := insecure.NewCredentials()
	if f.tlsCert != "" || f.tlsKey != "" || f.ca != "" {
		_, client, err := node.ClusterTLS(f.tlsCert, f.tlsKey, f.ca)
		if err != nil {
			return err
		}
		creds = credentials.NewTLS(mtls.VerifyServer(client, mtls.AcceptRoles("", mtls.RoleMember)))
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("--addr %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	// Membership changes, backups and restores need an operator
	// credential: the join token (--join-token-file) is one.
	if f.tokenFile != "" {
		tok, err := node.ReadJoinToken(f.tokenFile)
		if err != nil {
			return err
		}
		ctx = metadata.AppendToOutgoingContext(ctx, consensus.JoinTokenKey, tok)
	}
	return fn(ctx, conn)
}

func newClusterCmd() *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect and change a DC's router cluster: status, join, leave, backup, restore",
		Long: `cluster talks to a router node's cluster API (--cluster-api-addr of kvrouter node).
Join and leave may be sent to any member: a follower relays them to the leader.
They need an operator credential: an operator certificate (--tls-cert naming
kvr://<dc>/operator/<name>) or the cluster's join token (--join-token-file).`,
	}
	cmd.PersistentFlags().StringVar(&f.addr, "addr", "127.0.0.1:7100", "cluster API address of any member")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 10*time.Second, "deadline of the call")
	cmd.PersistentFlags().StringVar(&f.tlsCert, "tls-cert", "", "client certificate for a cluster with mutual TLS (with --tls-key and --tls-ca)")
	cmd.PersistentFlags().StringVar(&f.tlsKey, "tls-key", "", "private key of --tls-cert")
	cmd.PersistentFlags().StringVar(&f.ca, "tls-ca", "", "CA certificate of the cluster")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "join-token-file", "", "file holding the cluster's join token (--cluster-join-token-file of the nodes): the operator credential of join and leave without an operator certificate")

	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Print a member's view: raft state, leader, indexes, members, readiness",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := f.status(cmd)
			if err != nil {
				return err
			}
			return printStatus(cmd.OutOrStdout(), st, asJSON)
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var join kvrpb.AdminJoinRequest
	joinCmd := f.adminCmd("join", "Add a member (a voter, or with --nonvoter a replica that does not vote)",
		func(ctx context.Context, cmd *cobra.Command, c kvrpb.ClusterAdminClient) error {
			res, err := c.Join(ctx, &join)
			if err != nil {
				return fmt.Errorf("join %s: %w", join.GetId(), err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s joined (leader %s)\n", join.GetId(), res.GetLeaderId())
			return nil
		})
	joinCmd.Flags().StringVar(&join.Id, "id", "", "the new member's node id")
	joinCmd.Flags().StringVar(&join.RaftAddr, "raft-addr", "", "the new member's raft address")
	joinCmd.Flags().StringVar(&join.ApiAddr, "api-addr", "", "the new member's cluster API address")
	joinCmd.Flags().BoolVar(&join.Nonvoter, "nonvoter", false, "add a member that replicates without voting")
	joinCmd.Flags().StringVar(&join.Dc, "dc", "", "the new member's DC; the leader refuses a member of another DC (it also asks the member itself)")

	var leaveID string
	leave := f.adminCmd("leave", "Remove a member", func(ctx context.Context, cmd *cobra.Command, c kvrpb.ClusterAdminClient) error {
		res, err := c.Leave(ctx, &kvrpb.AdminLeaveRequest{Id: leaveID})
		if err != nil {
			return fmt.Errorf("leave %s: %w", leaveID, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s left (leader %s)\n", leaveID, res.GetLeaderId())
		return nil
	})
	leave.Flags().StringVar(&leaveID, "id", "", "the member to remove")
	cmd.AddCommand(status, joinCmd, leave)
	cmd.AddCommand(newBackupCmds(&f)...)
	return cmd
}

func printStatus(w io.Writer, st *kvrpb.AdminStatusResponse, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	fmt.Fprintf(w, "node %s (dc %s): %s, leader %s, term %d, ready %v\n", st.GetNodeId(), st.GetDc(), st.GetState(),
		cmp.Or(st.GetLeaderId(), "-"), st.GetTerm(), st.GetReady())
	fmt.Fprintf(w, "log: last %d, commit %d, applied %d; sessions %d; state hash %016x\n", st.GetLastLogIndex(),
		st.GetCommitIndex(), st.GetAppliedIndex(), st.GetSessions(), st.GetStateHash())
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT\tAPI\tSUFFRAGE\tLEADER")
	for _, m := range st.GetMembers() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", m.GetId(), m.GetRaftAddr(), cmp.Or(m.GetApiAddr(), "-"), m.GetSuffrage(), m.GetLeader())
	}
	return tw.Flush()
}
