package security

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
)

// engModel is the model the engines of these tests serve.
const engModel = "sec-model"

// engDC is the DC of these tests.
const engDC = "dc1"

// engNode is one `kvrouter node` process: a single-member raft cluster
// with its embedded NATS server, hard session affinity, and its log in a
// file that a failing test prints.
type engNode struct {
	t          *testing.T
	http, nats string
	cmd        *exec.Cmd
	log        string
	exited     chan struct{}
}

// startEngNode starts a node with extra flags and waits until it listens.
func startEngNode(t *testing.T, bin string, extra ...string) *engNode {
	t.Helper()
	dir := t.TempDir()
	n := &engNode{t: t, http: freeAddr(t), nats: freeAddr(t), log: filepath.Join(dir, "node.log"), exited: make(chan struct{})}
	raft, api := freeAddr(t), freeAddr(t)
	args := append([]string{"node", "--dc", engDC, "--node-id", "n1", "--http-addr", n.http,
		"--nats", "embedded", "--nats-listen", n.nats, "--raft-addr", raft, "--cluster-api-addr", api,
		"--data-dir", filepath.Join(dir, "data"), "--peers", "n1=" + raft + "/" + api, "--bootstrap",
		"--session-affinity-ttl", "1h", "--session-affinity-mode", "hard"}, extra...)
	logf, err := os.Create(n.log)
	if err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); _ = logf.Close(); close(n.exited) }()
	t.Cleanup(func() {
		_ = n.cmd.Process.Kill()
		<-n.exited
		if t.Failed() {
			data, _ := os.ReadFile(n.log)
			t.Logf("node log:\n%s", data)
		}
	})
	n.waitHTTP(30 * time.Second)
	return n
}

// waitHTTP waits until the node answers /health.
func (n *engNode) waitHTTP(within time.Duration) {
	n.t.Helper()
	engEventually(n.t, within, "the node listens", func() bool {
		resp, err := http.Get("http://" + n.http + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
}

// ready reports whether /ready answers 200 (serving, with an engine).
func (n *engNode) ready() bool {
	resp, err := http.Get("http://" + n.http + "/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// metric sums the samples of family name whose labels include every
// key="value" pair of labels, from the node's /metrics.
func (n *engNode) metric(name string, labels ...string) float64 {
	n.t.Helper()
	resp, err := http.Get("http://" + n.http + "/metrics")
	if err != nil {
		n.t.Fatal(err)
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
		series, value, ok := strings.Cut(line, " ")
		if !ok || !hasLabels(series, labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func hasLabels(series string, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		if !strings.Contains(series, labels[i]+`="`+labels[i+1]+`"`) {
			return false
		}
	}
	return true
}

// chat sends one small chat request (with a session id when session is
// set) and returns the status and the engine rank that served it.
func (n *engNode) chat(session, prompt string) (int, string) {
	n.t.Helper()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":%q}]}`, engModel, prompt)
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.http+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Kvrouter-Worker")
}

// engIdentity is an engine's NATS credentials: a user nkey's public key
// and the file holding its seed.
type engIdentity struct {
	id       uint64
	pub      string
	seedFile string
}

func newEngIdentity(t *testing.T, id uint64) engIdentity {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	f := filepath.Join(t.TempDir(), fmt.Sprintf("engine-%d.nk", id))
	if err := os.WriteFile(f, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return engIdentity{id: id, pub: pub, seedFile: f}
}

// usersFile writes the embedded server's users file for the engines.
func usersFile(t *testing.T, engines ...engIdentity) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("engines:\n")
	for _, e := range engines {
		fmt.Fprintf(&b, "  - id: %d\n    nkey: %s\n", e.id, e.pub)
	}
	f := filepath.Join(t.TempDir(), "nats-users.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// engEngines runs mocker engines in the test process until the test ends.
type engEngines struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newEngEngines(t *testing.T) *engEngines {
	e := &engEngines{}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { e.cancel(); e.wg.Wait() })
	return e
}

// start runs engine id on the node's NATS with auth and returns its
// endpoint URL.
func (e *engEngines) start(t *testing.T, natsAddr string, id uint64, auth natsbus.ClientAuth) string {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	bus, err := natsbus.Open(natsbus.Config{URL: "nats://" + natsAddr, Auth: auth}, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{DC: engDC, EngineID: id,
		Engine: mocker.Config{Model: engModel, SpeedUp: 1000, BlockSize: 16}}, bus.Conn, log)
	if err != nil {
		bus.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		bus.Close()
		t.Fatal(err)
	}
	e.wg.Go(func() {
		defer bus.Close()
		if err := srv.Serve(e.ctx, ln); err != nil && e.ctx.Err() == nil {
			t.Errorf("engine %d: %v", id, err)
		}
	})
	return "http://" + ln.Addr().String()
}

func engEventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
