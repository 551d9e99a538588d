package chaos

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bindSessions routes one request per session through the DC's members
// in turn and returns the engine each session was acknowledged on.
func bindSessions(t *testing.T, d *dc, prefix string, n int) map[string]string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	bound := map[string]string{}
	for i := range n {
		m := d.members[i%len(d.members)]
		s := send(c, m.http, fmt.Sprintf("%s-%d", prefix, i), prompt(i, 2))
		if s.status != 200 || s.engine == "" {
			t.Fatalf("binding %s-%d through %s: %+v", prefix, i, m.id, s)
		}
		bound[s.session] = s.engine
	}
	return bound
}

// checkBound checks every binding on every live member of d.
func checkBound(t *testing.T, d *dc, want map[string]string) {
	t.Helper()
	for _, m := range d.members {
		if !d.alive(m) {
			continue
		}
		var wrong []string
		waitUntil(t, 10*time.Second, m.id+" to hold every binding", func() bool {
			wrong = wrong[:0]
			for s, e := range want {
				if got := sessionEngine(m.http, s); got != e {
					wrong = append(wrong, fmt.Sprintf("%s=%q (want %s)", s, got, e))
				}
			}
			return len(wrong) == 0
		})
	}
}

// runCLI runs a kvrouter subcommand and returns its combined output.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kvrouter %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestBackupRestoreIntoFreshCluster binds sessions in one DC's cluster,
// backs it up with `kvrouter cluster backup`, restores the file into a
// freshly started cluster (whose own bindings it replaces) with `kvrouter
// cluster restore` sent to a follower, and checks every binding on every
// member of the new cluster, then again after one of them restarted.
func TestBackupRestoreIntoFreshCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process backup and restore; run without -short")
	}
	src := startNamedDC(t, "dcsrc", 3, 2)
	want := bindSessions(t, src, "b", 60)
	file := filepath.Join(t.TempDir(), "dcsrc.kvrbackup")
	t.Log(strings.TrimSpace(runCLI(t, "cluster", "backup", "--addr", src.leader().api, "--out", file)))

	dst := startNamedDC(t, "dcdst", 3, 2)
	bindSessions(t, dst, "stale", 5)
	l := dst.leader()
	var follower *member
	for _, m := range dst.members {
		if m != l {
			follower = m
			break
		}
	}
	t.Log(strings.TrimSpace(runCLI(t, "cluster", "restore", "--addr", follower.api, "--in", file)))
	checkBound(t, dst, want)
	for _, m := range dst.members {
		if got := sessionEngine(m.http, "stale-0"); got != "" {
			t.Errorf("%s kept a binding the backup does not hold: stale-0 on %s", m.id, got)
		}
	}
	// The restored cluster goes on binding, and a member restarted on its
	// data directory comes back with the restored state.
	after := bindSessions(t, dst, "after", 5)
	d := dst.members[2]
	dst.kill(d)
	dst.restart(d)
	dst.waitReady(d, 30*time.Second)
	for s, e := range after {
		want[s] = e
	}
	checkBound(t, dst, want)
}
