package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// newBackupCmds returns `kvrouter cluster backup` and `restore`.
func newBackupCmds(f *clusterFlags) []*cobra.Command {
	var out string
	backup := &cobra.Command{
		Use:   "backup",
		Short: "Write a snapshot of the cluster's state (bindings, workers, block ownership) to a file",
		Long: `backup asks the member at --addr for a snapshot of its replicated state, taken now,
and writes it to --out (a new file; "-" is stdout). Ask the leader for the freshest state:
a follower's lags by its apply lag. The file starts with two lines of text (a magic line
and the backup's info as JSON: DC, node, raft index, bindings), then the snapshot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.backup(cmd, out) },
	}
	backup.Flags().StringVarP(&out, "out", "o", "", "file to write (required; - for stdout)")
	var in string
	restore := &cobra.Command{
		Use:   "restore",
		Short: "Replace the whole cluster's state with a backup",
		Long: `restore sends a backup file to the leader of the cluster that --addr belongs to (the
member at --addr tells who leads), which verifies it whole, then replaces the state of
every member through raft. Bindings, workers and block ownership all come from the
backup; the cluster's membership stays its own. Bindings keep their idle deadlines, so
those that were idle past their TTL since the backup expire at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.restore(cmd, in) },
	}
	restore.Flags().StringVarP(&in, "in", "i", "", "backup file to restore (required)")
	return []*cobra.Command{backup, restore}
}

// backup streams the member's snapshot into a temporary file beside out
// and renames it into place once complete, so that out never holds half
// a backup.
func (f *clusterFlags) backup(cmd *cobra.Command, out string) error {
	if out == "" {
		return errors.New("--out: the file to write is required")
	}
	return f.connect(cmd, f.addr, f.timeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		info, data, err := fetchBackup(ctx, kvrpb.NewClusterBackupClient(conn))
		if err != nil {
			return fmt.Errorf("backup from %s: %w", f.addr, err)
		}
		if err := writeBackup(cmd, out, info, data); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "backup of dc %s from %s at index %d: %d bindings, %d bytes\n",
			info.GetDc(), info.GetNodeId(), info.GetAppliedIndex(), info.GetBindings(), len(data))
		return nil
	})
}

// fetchBackup reads a Backup stream whole.
func fetchBackup(ctx context.Context, c kvrpb.ClusterBackupClient) (*kvrpb.BackupInfo, []byte, error) {
	stream, err := c.Backup(ctx, &kvrpb.BackupRequest{})
	if err != nil {
		return nil, nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, nil, err
	}
	if first.GetInfo() == nil {
		return nil, nil, errors.New("the stream did not start with the backup's info")
	}
	var data []byte
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return first.GetInfo(), data, nil
		}
		if err != nil {
			return nil, nil, err
		}
		data = append(data, c.GetData()...)
	}
}

// writeBackup writes the backup file, atomically unless it is stdout.
func writeBackup(cmd *cobra.Command, out string, info *kvrpb.BackupInfo, data []byte) error {
	if out == "-" {
		return consensus.WriteBackupFile(cmd.OutOrStdout(), info, bytes.NewReader(data))
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".part-*")
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	err = consensus.WriteBackupFile(tmp, info, bytes.NewReader(data))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	return nil
}

// restore sends the backup file to the cluster's leader.
func (f *clusterFlags) restore(cmd *cobra.Command, in string) error {
	if in == "" {
		return errors.New("--in: the backup file is required")
	}
	file, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("--in: %w", err)
	}
	defer file.Close()
	info, snapshot, err := consensus.ReadBackupFile(file)
	if err != nil {
		return fmt.Errorf("--in %s: %w", in, err)
	}
	st, err := f.status(cmd)
	if err != nil {
		return err
	}
	leader := st.GetLeaderApiAddr()
	if leader == "" {
		return fmt.Errorf("%s knows no leader (or not its cluster API address); try again, or give the leader's --addr", f.addr)
	}
	return f.connect(cmd, leader, max(f.timeout, consensus.RestoreTimeout), func(ctx context.Context, conn *grpc.ClientConn) error {
		res, err := sendRestore(ctx, kvrpb.NewClusterBackupClient(conn), snapshot)
		if err != nil {
			return fmt.Errorf("restore to %s: %w", leader, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "restored the backup of dc %s (index %d) at index %d on leader %s: %d bindings\n",
			info.GetDc(), info.GetAppliedIndex(), res.GetIndex(), res.GetLeaderId(), res.GetBindings())
		return nil
	})
}

// restoreChunkBytes is the data of one restore message, under gRPC's
// 4 MiB message limit.
const restoreChunkBytes = 1 << 20

// sendRestore streams the snapshot to the leader.
func sendRestore(ctx context.Context, c kvrpb.ClusterBackupClient, r io.Reader) (*kvrpb.BackupRestoreResponse, error) {
	stream, err := c.Restore(ctx)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, restoreChunkBytes)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if serr := stream.Send(&kvrpb.BackupRestoreChunk{Data: buf[:n]}); serr != nil {
				_, rerr := stream.CloseAndRecv() // the server's reason
				return nil, errors.Join(serr, rerr)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return stream.CloseAndRecv()
		}
		if err != nil {
			return nil, err
		}
	}
}
