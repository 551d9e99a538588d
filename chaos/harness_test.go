package chaos

import (
	"bytes"
	"context"
	"fmt"
	"github.com/kvrouter/kvrouter/internal/buildtest"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/freeport"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
)

// binary is the kvrouter executable TestMain built.
var binary string

// blockSize is the engines' KV block size in these tests.
const blockSize = 16

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	readGitSHA()
	if err := parsePorts(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	bin, cleanup, err := buildtest.Kvrouter("kvrouter-chaos-bin", "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "building kvrouter:", err)
		return 1
	}
	defer cleanup()
	binary = bin
	return m.Run()
}

// freeAddr returns a free loopback address below the ephemeral port
// range, so that a member restarting on it can bind it again (see
// internal/freeport); with KVRTEST_CHAOS_PORTS=lo-hi, a port of that range.
func freeAddr(t *testing.T) string {
	t.Helper()
	if chaosPorts.lo > 0 {
		return chaosPorts.next(t)
	}
	addr, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// portRange hands out the ports of KVRTEST_CHAOS_PORTS in turn, skipping those
// that do not bind, so that the suite never touches a port outside it.
type portRange struct {
	mu     sync.Mutex
	lo, hi int
	cur    int
}

var chaosPorts portRange

// parsePorts reads KVRTEST_CHAOS_PORTS ("lo-hi"); unset leaves the range off.
func parsePorts() error {
	v := os.Getenv("KVRTEST_CHAOS_PORTS")
	if v == "" {
		return nil
	}
	lo, hi, ok := strings.Cut(v, "-")
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil || l < 1 || h > 65535 || h-l < 64 {
		return fmt.Errorf("KVRTEST_CHAOS_PORTS=%q: want lo-hi, at least 64 ports", v)
	}
	chaosPorts.lo, chaosPorts.hi, chaosPorts.cur = l, h, l
	return nil
}

func (r *portRange) next(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for range r.hi - r.lo + 1 {
		port := r.cur
		r.cur++
		if r.cur > r.hi {
			r.cur = r.lo
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if ln, err := net.Listen("tcp", addr); err == nil {
			_ = ln.Close()
			return addr
		}
	}
	t.Fatalf("no free port left in KVRTEST_CHAOS_PORTS %d-%d", r.lo, r.hi)
	return ""
}

// member is one router node process.
type member struct {
	id, http, raft, api, dir string
	log                      string
	cmd                      *exec.Cmd
	exited                   chan struct{}
	starts                   int
	// peerRaft and peerAPI are the addresses the other members reach this
	// one at: its own, or a proxy's in front of them (see linknet).
	peerRaft, peerAPI string
}

// peerEntry is the member's --peers value: the addresses others dial.
func (m *member) peerEntry() string {
	r, a := m.raft, m.api
	if m.peerRaft != "" {
		r, a = m.peerRaft, m.peerAPI
	}
	return fmt.Sprintf("%s=%s/%s", m.id, r, a)
}

// pid is the member's process id, 0 while it is down.
func (m *member) pid() int {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// dc is a DC's router cluster as processes, with its NATS server and
// engines in this process.
type dc struct {
	t       *testing.T
	name    string
	nats    string
	root    string
	members []*member
	// net, when set before the members start, puts a proxy in front of
	// every member's raft and cluster API listeners (see linknet).
	net *linknet
	// bus is the DC's NATS server, in this process (nil while stopped).
	bus *natsbus.Bus
	// extra are more `kvrouter node` arguments for every member.
	extra []string
	mu    sync.Mutex
}

// startDC starts NATS, the engines and three node processes, and waits
// until every node is ready.
func startDC(t *testing.T, engines int) *dc {
	t.Helper()
	return startNamedDC(t, "dc1", 3, engines)
}

// startNamedDC starts DC name with nodes router nodes (1 or more).
func startNamedDC(t *testing.T, name string, nodes, engines int) *dc {
	t.Helper()
	return startDCWith(t, name, nodes, func(d *dc, ctx context.Context, wg *sync.WaitGroup) {
		for id := range engines {
			startEngine(t, ctx, wg, d.nats, name, uint64(id+1))
		}
	})
}

// startDCWith starts DC name's NATS server, then its engines by calling
// engines (which must not return before they are started), then nodes
// router nodes with the extra arguments, and waits until every node is
// ready.
func startDCWith(t *testing.T, name string, nodes int, engines func(d *dc, ctx context.Context, wg *sync.WaitGroup), extra ...string) *dc {
	t.Helper()
	bus, err := natsbus.Open(natsbus.Config{URL: natsbus.Embedded, EmbeddedAddr: freeAddr(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &dc{t: t, name: name, nats: bus.URL(), extra: extra, bus: bus}
	root := t.TempDir() // before the cleanup below, so the logs outlive it
	ectx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		for _, m := range d.members {
			d.kill(m)
		}
		if t.Failed() {
			d.dumpLogs()
		}
		cancel()
		wg.Wait()
		if d.bus != nil {
			d.bus.Close()
		}
	})
	engines(d, ectx, &wg)
	d.root = root
	for range nodes {
		d.members = append(d.members, d.newMember())
	}
	if d.net != nil {
		for _, m := range d.members {
			d.net.front(m)
		}
	}
	for _, m := range d.members {
		d.start(m, d.peers())
	}
	for _, m := range d.members {
		d.waitReady(m, 60*time.Second)
	}
	return d
}

// newMember names the next member and picks its addresses; it is not
// started.
func (d *dc) newMember() *member {
	d.t.Helper()
	m := &member{id: fmt.Sprintf("%s-n%d", d.name, len(d.members)+1), http: freeAddr(d.t), raft: freeAddr(d.t), api: freeAddr(d.t)}
	m.dir = filepath.Join(d.root, m.id)
	m.log = filepath.Join(d.root, m.id+".log")
	return m
}

// peers is the --peers value of the current members.
func (d *dc) peers() string {
	var peers []string
	for _, o := range d.members {
		peers = append(peers, o.peerEntry())
	}
	return strings.Join(peers, ",")
}

func startEngine(t *testing.T, ctx context.Context, wg *sync.WaitGroup, url, dcName string, id uint64) {
	t.Helper()
	startEngineAt(t, ctx, wg, url, dcName, id, 1000)
}

// startEngineAt starts a simulated engine whose iterations run speedUp
// times faster than the reference hardware's (1: a decode step of about
// 8 ms, for streams that last seconds).
func startEngineAt(t *testing.T, ctx context.Context, wg *sync.WaitGroup, url, dcName string, id uint64, speedUp float64) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	bus, err := natsbus.Open(natsbus.Config{URL: url}, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{DC: dcName, EngineID: id, Engine: mocker.Config{SpeedUp: speedUp, BlockSize: blockSize}}, bus.Conn, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		defer bus.Close()
		if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
			t.Errorf("engine %d: %v", id, err)
		}
	})
}

// start launches the member's process, appending to its log.
func (d *dc) start(m *member, peers string) {
	d.t.Helper()
	d.startWith(m, "--peers", peers, "--bootstrap")
}

// startWith launches the member's process with the given cluster
// arguments (--peers and --bootstrap, or --join).
func (d *dc) startWith(m *member, cluster ...string) {
	d.t.Helper()
	logf, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	m.cmd = exec.Command(binary, "node", "--dc", d.name, "--node-id", m.id, "--http-addr", m.http,
		"--nats", d.nats, "--raft-addr", m.raft, "--cluster-api-addr", m.api, "--data-dir", m.dir,
		"--session-affinity-ttl", "1h", "--session-affinity-mode", "hard",
		"--log-level", "info")
	m.cmd.Args = append(append(m.cmd.Args, cluster...), d.extra...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	m.starts++
	m.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}(m.cmd, m.exited)
}

// restart starts a killed member again on its data directory.
func (d *dc) restart(m *member) {
	d.t.Helper()
	d.start(m, d.peers())
}

// kill sends SIGKILL and waits for the process to be gone.
func (d *dc) kill(m *member) {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
	m.cmd = nil
}

// signal sends sig (SIGSTOP, SIGCONT) to the member's process.
func (d *dc) signal(m *member, sig syscall.Signal) {
	d.t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
}

func (d *dc) alive(m *member) bool { return m.cmd != nil }

// waitReady polls the member's /ready until it answers 200.
func (d *dc) waitReady(m *member, within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	c := http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get("http://" + m.http + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s not ready within %v", m.id, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leader asks each live member's cluster API for the leader's id.
func (d *dc) leader() *member {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range d.members {
			if !d.alive(m) {
				continue
			}
			out, err := exec.Command(binary, "cluster", "status", "--addr", m.api, "--timeout", "2s").CombinedOutput()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) == 5 && f[4] == "true" {
					for _, l := range d.members {
						if l.id == f[0] && d.alive(l) {
							return l
						}
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.t.Fatal("no leader found")
	return nil
}

// dumpLogs prints the tail of every member's log.
func (d *dc) dumpLogs() {
	for _, m := range d.members {
		b, err := os.ReadFile(m.log)
		if err != nil {
			continue
		}
		lines := bytes.Split(b, []byte("\n"))
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		d.t.Logf("---- %s (%s) ----\n%s", m.id, m.log, bytes.Join(lines, []byte("\n")))
	}
}
