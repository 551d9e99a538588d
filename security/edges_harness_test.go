package security

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/freeport"
)

// edgesNode is one `kvrouter node` process on loopback, its logs
// captured.
type edgesNode struct {
	url  string
	logs *edgesLog
}

// startEdgesNode runs a node with an embedded NATS server and the extra
// arguments, waits for it to answer /health, and stops it (SIGTERM, then
// SIGKILL) when the test ends.
func startEdgesNode(t *testing.T, bin string, args ...string) *edgesNode {
	t.Helper()
	httpAddr, natsAddr := edgesFreeAddr(t), edgesFreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"node", "--http-addr", httpAddr, "--nats-listen", natsAddr,
		"--log-level", "debug"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	logs := &edgesLog{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	n := &edgesNode{url: "http://" + httpAddr, logs: logs}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(n.url + "/health"); err == nil {
			_ = resp.Body.Close()
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("node did not answer /health; logs:\n%s", logs.String())
	return nil
}

// call sends one request with an optional bearer credential and returns
// the status and body.
func (n *edgesNode) call(t *testing.T, method, path, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, n.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func edgesFreeAddr(t *testing.T) string {
	t.Helper()
	a, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// edgesLog collects a process's stdout and stderr, which exec copies
// from two goroutines.
type edgesLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *edgesLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *edgesLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
