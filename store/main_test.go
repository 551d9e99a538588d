package store

import (
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: raft
// nodes, Pebble compactions and snapshot streams all have owners.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// quietLogger drops Pebble's log lines in tests.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// memOpts returns options for dir on fs with a quiet logger.
func memOpts(fs vfs.FS, dir string) Options {
	return Options{Dir: dir, FS: fs, Logger: quietLogger}
}

// openLog opens a LogStore on fs and closes it at cleanup.
func openLog(t testing.TB, fs vfs.FS) *LogStore {
	t.Helper()
	s, err := OpenLogStore(memOpts(fs, "raft"))
	if err != nil {
		t.Fatalf("OpenLogStore: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openFSM opens an FSMStore on fs and closes it at cleanup.
func openFSM(t testing.TB, fs vfs.FS) *FSMStore {
	t.Helper()
	s, err := OpenFSM(memOpts(fs, "fsm"))
	if err != nil {
		t.Fatalf("OpenFSM: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
