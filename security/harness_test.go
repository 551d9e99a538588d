package security

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/kvrouter/kvrouter/internal/buildtest"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/freeport"
)

// binary is the kvrouter executable TestMain built.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, cleanup, err := buildtest.Kvrouter("kvrouter-security-bin", "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "building kvrouter:", err)
		return 1
	}
	defer cleanup()
	binary = bin
	return m.Run()
}

// freeAddr is a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// syncBuffer is a bytes.Buffer safe for a process's output and a test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a running kvrouter process; its output is kept and printed when
// the test fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// start runs kvrouter with args until the test ends (SIGTERM, then kill).
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(binary, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() || os.Getenv("KVRTEST_LOG") != "" {
			t.Logf("--- %s output:\n%s", p.name, p.out)
		}
	})
	return p
}

// stop ends the process: SIGTERM, then SIGKILL after 5 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited waits up to d for the process to exit and returns its error.
func (p *proc) exited(d time.Duration) (error, bool) {
	select {
	case <-p.done:
		return p.err, true
	case <-time.After(d):
		return nil, false
	}
}

// runCmd runs a kvrouter command to its end and returns its output.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	return string(out), err
}

// waitFor polls cond every 50 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric sums the samples of family name on the Prometheus page at url
// whose labels include every want (`key="value"` each); -1 when the page
// cannot be read.
func metric(url, name string, want ...string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if !hasAll(line, want) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func hasAll(line string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(line, w) {
			return false
		}
	}
	return true
}
