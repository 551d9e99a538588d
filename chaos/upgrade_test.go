package chaos

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// previousTag is the release the rolling-upgrade test upgrades from.
const previousTag = "v0.1.0"

// buildTag builds kvrouter as of tag into dir, from `git archive` of the
// repository holding this package, and returns the binary's path; it
// skips the test when git, the repository or the tag is unavailable.
func buildTag(t *testing.T, tag, dir string) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("rolling upgrade from %s: no git on PATH", tag)
	}
	if out, err := exec.Command(git, "rev-parse", "--verify", "--quiet", tag+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("rolling upgrade from %s: the tag is not in this repository (%v: %s); fetch the tags", tag, err, strings.TrimSpace(string(out)))
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("rolling upgrade from %s: not in a git work tree: %v", tag, err)
	}
	src := filepath.Join(dir, "src")
	// From the top: in a subdirectory git archive takes only that.
	archive := exec.Command(git, "archive", "--format=tar", tag)
	archive.Dir = strings.TrimSpace(string(top))
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.Start(); err != nil {
		t.Fatal(err)
	}
	if err := untar(pipe, src); err != nil {
		t.Fatalf("extracting %s: %v", tag, err)
	}
	if err := archive.Wait(); err != nil {
		t.Fatalf("git archive %s: %v", tag, err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "kvrouter-"+tag)
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/kvrouter")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", tag, err, out)
	}
	return bin
}

// untar extracts a tar stream of regular files and directories into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, h.FileInfo().Mode())
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

// TestS17RollingUpgrade starts a three-node cluster on the previous release
// (built from its tag), binds sessions, then replaces the nodes one at a
// time by the binary under test on the same data directories: followers
// first, the leader last (SIGTERM, so the new build's leader hands its
// leadership on). After each step, with the cluster mixed, it binds more
// sessions through every member (old members forward to a new leader and
// back) and checks every binding made so far on every member. Command
// types the new build adds carry the ignore-if-unknown bit, so the old
// members skip them rather than halt; a member that halted would stop
// applying, and the binding checks would find it. Under `make chaos`
// only: it builds a second binary.
func TestS17RollingUpgrade(t *testing.T) {
	if testing.Short() || os.Getenv("KVR_CHAOS_SECONDS") == "" {
		t.Skip("rolling upgrade builds the previous release; run with make chaos (KVR_CHAOS_SECONDS set)")
	}
	start := time.Now()
	old := buildTag(t, previousTag, t.TempDir())
	t.Logf("built %s in %v", previousTag, time.Since(start).Round(time.Second))

	current := binary
	binary = old // the members start on the previous release
	t.Cleanup(func() { binary = current })
	d := startNamedDC(t, "dcu", 3, 2)
	binary = current
	want := bindSessions(t, d, "v0", 30)
	checkBound(t, d, want)

	order := []*member{}
	l := d.leader()
	for _, m := range d.members {
		if m != l {
			order = append(order, m)
		}
	}
	order = append(order, l)
	for step, m := range order {
		d.signal(m, syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(40 * time.Second):
			t.Fatalf("%s did not exit within 40s of SIGTERM", m.id)
		}
		m.cmd = nil
		d.restart(m) // the binary under test, on the same data directory
		d.waitReady(m, 60*time.Second)
		for s, e := range bindSessions(t, d, fmt.Sprintf("step%d", step), 15) {
			want[s] = e
		}
		checkBound(t, d, want)
		t.Logf("step %d: %s upgraded, leader %s, %d bindings on every member", step, m.id, d.leader().id, len(want))
	}
}
