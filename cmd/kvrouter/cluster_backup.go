package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

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
