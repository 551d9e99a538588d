package consensus

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// ErrBadBackupFile reports a file that is not a kvrouter backup, or one of
// a later format.
var ErrBadBackupFile = errors.New("consensus: not a kvrouter backup file")

// backupMagic is a backup file's first line. The version after it
// changes when the layout does; the snapshot stream inside carries its
// own format number.
const backupMagic = "kvrouter-backup 1"

// maxBackupInfoBytes bounds the info line: a few hundred bytes in
// practice.
const maxBackupInfoBytes = 64 << 10

// WriteBackupFile writes a backup file: the magic line, the info as one
// line of JSON (readable with head -2), then the snapshot stream as
// Backup served it.
func WriteBackupFile(w io.Writer, info *kvrpb.BackupInfo, snapshot io.Reader) error {
	line, err := protojson.Marshal(info)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%s\n%s\n", backupMagic, line); err != nil {
		return err
	}
	_, err = io.Copy(w, snapshot)
	return err
}

// ReadBackupFile reads a backup file's magic line and info, and returns
// the info and the reader positioned at the snapshot stream (verified by
// RestoreBackup, which refuses a damaged one).
func ReadBackupFile(r io.Reader) (*kvrpb.BackupInfo, io.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := readLine(br)
	if err != nil || magic != backupMagic {
		return nil, nil, fmt.Errorf("%w: first line %q, want %q", ErrBadBackupFile, trimQuote(magic), backupMagic)
	}
	line, err := readLine(br)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: info line: %w", ErrBadBackupFile, err)
	}
	info := &kvrpb.BackupInfo{}
	if err := protojson.Unmarshal([]byte(line), info); err != nil {
		return nil, nil, fmt.Errorf("%w: info line: %w", ErrBadBackupFile, err)
	}
	return info, br, nil
}

// readLine reads one line of at most maxBackupInfoBytes, without its
// newline.
func readLine(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for b.Len() <= maxBackupInfoBytes {
		frag, err := br.ReadSlice('\n')
		b.Write(frag)
		switch {
		case err == nil:
			return strings.TrimSuffix(b.String(), "\n"), nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return b.String(), err
		}
	}
	return "", fmt.Errorf("line over %d bytes", maxBackupInfoBytes)
}

// trimQuote shortens what an error quotes from a foreign file.
func trimQuote(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
