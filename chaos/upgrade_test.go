package chaos

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
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

// TestS17RollingUpgrade upgrades a DC of the previous release, built from
// its tag (three router nodes and two engines, all of that release), as an
// operator would: the routers first, one at a time on the same data
// directories (followers, then the leader, with SIGTERM); the engines
// stay on the previous release. Engines of the previous release speak protocol v1 (shared
// worker subjects), which upgraded routers still hear. After each step
// it binds more sessions through every member (old members forward to a
// new leader and back) and checks every binding made so far on every
// member.
//
// Before the old leader is upgraded it restarts once on the old build,
// so the leadership is on an upgraded member while an old one is still
// in the cluster: a runtime busy threshold is then set through the
// leader's POST /busy_threshold (command type 20, with the
// ignore-if-unknown bit). The old member skips that entry and keeps
// applying the ones after it, which the binding checks through it show.
// Under `make chaos` only: it builds a second binary.
func TestS17RollingUpgrade(t *testing.T) {
	if testing.Short() || os.Getenv("KVRTEST_CHAOS_SECONDS") == "" {
		t.Skip("rolling upgrade builds the previous release; run with make chaos (KVRTEST_CHAOS_SECONDS set)")
	}
	start := time.Now()
	old := buildTag(t, previousTag, t.TempDir())
	t.Logf("built %s in %v", previousTag, time.Since(start).Round(time.Second))

	engineLogs := t.TempDir()
	current := binary
	binary = old // the members start on the previous release
	t.Cleanup(func() { binary = current })
	d := startDCWith(t, "dcu", 3, func(d *dc, _ context.Context, _ *sync.WaitGroup) {
		for id := range uint64(2) {
			startEngineProcessOf(t, old, d, id+1, engineLogs)
		}
	})
	binary = current
	want := bindSessions(t, d, "v0", 30)
	checkBound(t, d, want)

	l := d.leader()
	var followers []*member
	for _, m := range d.members {
		if m != l {
			followers = append(followers, m)
		}
	}
	step := func(name string, m *member, bin string) {
		t.Helper()
		upgradeMember(t, d, m, bin, name == "oldrestart")
		for s, e := range bindSessions(t, d, name, 15) {
			want[s] = e
		}
		checkBound(t, d, want)
		t.Logf("%s: %s restarted, leader %s, %d bindings on every member", name, m.id, d.leader().id, len(want))
	}
	step("follower1", followers[0], current)
	step("follower2", followers[1], current)

	// The old leader restarts on its build: the leadership moves to an
	// upgraded member, with an old one still a voter.
	step("oldrestart", l, old)
	nl := d.leader()
	if nl == l {
		t.Fatalf("%s, on %s, leads again after its restart", l.id, previousTag)
	}
	setBusyThreshold(t, nl, 0.5)
	for _, m := range followers {
		waitUntil(t, 10*time.Second, m.id+" to apply the runtime threshold", func() bool { return busyThreshold(t, m) == 0.5 })
	}
	for s, e := range bindSessions(t, d, "mixed", 15) {
		want[s] = e
	}
	checkBound(t, d, want) // l applied the entries after the one it skipped
	if halted := logHas(t, l.log, "FSM halted"); halted {
		t.Fatalf("%s (%s) halted on the new command type", l.id, previousTag)
	}

	step("leader", l, current)
	// l skipped the threshold entry while it was old: its applied state
	// never has it (docs/operations.md). Setting it again reaches all.
	setBusyThreshold(t, d.leader(), 0.5)
	for _, m := range d.members {
		waitUntil(t, 10*time.Second, m.id+" to apply the runtime threshold", func() bool { return busyThreshold(t, m) == 0.5 })
	}
}

// upgradeMember stops m with SIGTERM and starts it on bin on the same
// data directory; with newLeader, only once another member leads (the
// previous release does not hand its leadership on when it stops, and a
// quick restart can win the next election).
func upgradeMember(t *testing.T, d *dc, m *member, bin string, newLeader bool) {
	t.Helper()
	d.signal(m, syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(40 * time.Second):
		t.Fatalf("%s did not exit within 40s of SIGTERM", m.id)
	}
	m.cmd = nil
	if newLeader {
		d.leader() // among the live members
	}
	current := binary
	binary = bin
	defer func() { binary = current }()
	d.restart(m)
	d.waitReady(m, 60*time.Second)
}

// setBusyThreshold sets the mocker model's active decode blocks threshold
// through m's operator API (loopback listeners need no token).
func setBusyThreshold(t *testing.T, m *member, v float64) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"active_decode_blocks_threshold":%v}`, mocker.DefaultModel, v)
	resp, err := http.Post("http://"+m.http+"/busy_threshold", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("POST /busy_threshold on %s: %d %s", m.id, resp.StatusCode, b)
	}
}

// busyThreshold is m's runtime active decode blocks threshold of the
// mocker model, or -1 when none is set at run time.
func busyThreshold(t *testing.T, m *member) float64 {
	t.Helper()
	resp, err := http.Get("http://" + m.http + "/busy_threshold?model=" + url.QueryEscape(mocker.DefaultModel))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var v struct {
		ActiveDecodeBlocks *float64 `json:"active_decode_blocks_threshold"`
		Source             string   `json:"source"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil || v.Source != "runtime" || v.ActiveDecodeBlocks == nil {
		return -1
	}
	return *v.ActiveDecodeBlocks
}
