package inproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// flipFile flips a byte in the middle of a file on the OS file system.
func flipFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		t.Fatalf("%s is empty", path)
	}
	data[len(data)/2] ^= 0x5a
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// flipMem flips several bytes spread over a file of an in-memory disk.
func flipMem(t *testing.T, fs *vfs.MemFS, path string) {
	t.Helper()
	buf, err := fs.UnsafeGetFileDataBuffer(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 8; i++ {
		buf[len(buf)*i/8] ^= 0x5a
	}
}

// findMem returns the files under dir whose name ends with suffix.
func findMem(t *testing.T, fs vfs.FS, dir, suffix string) []string {
	t.Helper()
	var out []string
	names, err := fs.List(dir)
	if err != nil {
		return nil
	}
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		if strings.HasSuffix(n, suffix) {
			out = append(out, p)
		}
		if st, err := fs.Stat(p); err == nil && st.IsDir() {
			out = append(out, findMem(t, fs, p, suffix)...)
		}
	}
	return out
}

// stateFile is a snapshot directory's data file.
func stateFile(dir string) string { return filepath.Join(dir, "state.bin") }
