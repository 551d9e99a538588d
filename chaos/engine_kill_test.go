package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/mocker"
)

// engineProc is one `kvrouter mocker` process.
type engineProc struct {
	id     uint64
	cmd    *exec.Cmd
	exited chan struct{}
}

// startEngineProcess starts engine id as a child process registering with
// d's NATS server and returns once it runs; its log goes to dir.
func startEngineProcess(t *testing.T, d *dc, id uint64, dir string) *engineProc {
	t.Helper()
	return startEngineProcessOf(t, binary, d, id, dir)
}

// startEngineProcessOf is startEngineProcess with the mocker of bin (the
// rolling upgrade runs the previous release's) and the extra mocker
// arguments; the log is appended to.
func startEngineProcessOf(t *testing.T, bin string, d *dc, id uint64, dir string, extra ...string) *engineProc {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("engine-%d.log", id)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mocker", "--nats", d.nats, "--dc", d.name, "--engine-id", strconv.FormatUint(id, 10),
		"--http-addr", freeAddr(t), "--speedup", "10", "--block-size", strconv.Itoa(blockSize),
		"--heartbeat-interval", "100ms", "--log-level", "warn")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &engineProc{id: id, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(e.exited) }()
	t.Cleanup(e.kill)
	return e
}

// kill sends SIGKILL and waits until the process is gone.
func (e *engineProc) kill() {
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.exited
}

// TestS21EngineKillMidStream: clients stream completions of sessions
// (hard affinity) through three router nodes to three engine processes,
// and one engine is killed with SIGKILL. The engine stays registered
// until the nodes' liveness timeout (3 s), but:
//
//   - every request sent after the kill is served, by a live engine: a
//     node that finds the dead engine unreachable routes the request again
//     and leaves the engine out (kvrouter_router_engine_unreachable_total);
//   - the streams it was serving end at once, not at the liveness timeout;
//   - a session moves at most once, away from the dead engine;
//   - once the load stops, the nodes' booked load on every engine is
//     zero again and the dead engine's gauges are gone.
func TestS21EngineKillMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster; run without -short")
	}
	r := startEngineFaultRun(t)
	victim := r.engines[1]
	dead := fmt.Sprintf("%d/", victim.id)
	killedAt := r.h.now()
	victim.kill()
	reaped := r.h.now()
	t.Logf("engine %d killed", victim.id)
	time.Sleep(r.step)
	r.stop()

	checkServedAfter(t, r.h, reaped, "the kill")
	checkInFlightEndedBy(t, r.h, killedAt, killedAt, 2*time.Second)
	checkSessionsMovedOnlyOffTheDead(t, r.h, dead)
	var unreachable float64
	for _, m := range r.d.members {
		unreachable += metricSum(t, m, "kvrouter_router_engine_unreachable_total")
	}
	if unreachable < 1 {
		t.Fatal("no request found the dead engine unreachable: the scenario did not exercise rerouting")
	}
	t.Logf("requests that found the dead engine unreachable and were routed again: %v", unreachable)
	checkLoadFreed(t, r.d, dead)
}

// TestS21EnginePauseMidStream: the same load, and one engine is stopped
// with SIGSTOP: it holds its connections open and answers nothing, and
// its heartbeats stop. Once each node drops it for silence (the 3 s
// liveness timeout):
//
//   - the requests it held, mid-stream or waiting for an answer, end at
//     once (the node ends the requests of an engine it dropped for
//     silence) instead of hanging until the client gives up;
//   - every request sent after that is served;
//   - a session moves at most once, away from the paused engine;
//   - the nodes' booked load returns to zero.
func TestS21EnginePauseMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster; run without -short")
	}
	r := startEngineFaultRun(t)
	victim := r.engines[1]
	paused := fmt.Sprintf("%d/", victim.id)
	r.startedFault = r.h.now()
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("engine %d paused", victim.id)
	dropped := r.waitDropped(t, 2)
	t.Logf("every node dropped it %v after the pause", time.Duration(dropped-r.startedFault))
	time.Sleep(r.step)
	r.stop()

	checkServedAfter(t, r.h, dropped, "every node dropped the paused engine")
	if checkInFlightEndedBy(t, r.h, r.startedFault, dropped, 2*time.Second) == 0 {
		t.Fatal("no request was held by the paused engine: the scenario did not exercise it")
	}
	checkSessionsMovedOnlyOffTheDead(t, r.h, paused)
	checkLoadFreed(t, r.d, paused)
}

// engineFaultRun is a DC of three node processes and three engine
// processes under a streaming load of 8 clients over 40 sessions, for the
// engine fault scenarios.
type engineFaultRun struct {
	d            *dc
	engines      []*engineProc
	h            *history
	step         time.Duration
	startedFault int64
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

// startEngineFaultRun starts the DC and the load and returns after one
// phase of load, when the fault is due.
func startEngineFaultRun(t *testing.T) *engineFaultRun {
	t.Helper()
	sd := seed()
	t.Logf("seed %d (KVRTEST_CHAOS_SEED replays it)", sd)
	logs := t.TempDir()
	r := &engineFaultRun{h: newHistory(), step: phase(2 * time.Second)}
	r.d = startDCWith(t, "dc1", 3, func(d *dc, _ context.Context, _ *sync.WaitGroup) {
		for id := range uint64(3) {
			r.engines = append(r.engines, startEngineProcess(t, d, id+1, logs))
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for ci := range 8 {
		r.wg.Go(func() {
			rng := rand.New(rand.NewPCG(sd, uint64(ci)))
			c := newClient(ci, r.h)
			for ctx.Err() == nil {
				s := rng.IntN(40)
				c.stream(r.d.members[rng.IntN(len(r.d.members))], "s-"+strconv.Itoa(s), s)
			}
		})
	}
	time.Sleep(r.step)
	r.startedFault = r.h.now()
	return r
}

// stop ends the load and waits for the clients.
func (r *engineFaultRun) stop() {
	r.cancel()
	r.wg.Wait()
}

// waitDropped polls every node until it counts live engine ranks no more
// than live, and returns the history time when the last one did.
func (r *engineFaultRun) waitDropped(t *testing.T, live float64) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range r.d.members {
		for metricSum(t, m, "kvrouter_workers") > live {
			if time.Now().After(deadline) {
				t.Fatalf("%s still counts the silent engine after 30 s", m.id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return r.h.now()
}

// stream sends one streaming completion of session through m, reads the
// whole SSE answer and records it; a stream that ends without [DONE] or
// with an error event is recorded as failed (indeterminate).
func (c *client) stream(m *member, session string, seed int) {
	tokens := make([]int, 64)
	for i := range tokens {
		tokens[i] = (seed*7919 + i*31) % 32000
	}
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": tokens, "max_tokens": 48, "stream": true})
	req, _ := http.NewRequest("POST", "http://"+m.http+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", session)
	o := op{client: c.id, session: session, node: m.id, call: c.h.now()}
	defer func() { o.ret = c.h.now(); c.h.add(o) }()
	resp, err := c.http.Do(req)
	if err != nil {
		o.unknown, o.err = true, err.Error()
		return
	}
	defer resp.Body.Close()
	o.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		o.unknown, o.err = true, fmt.Sprintf("status %d", resp.StatusCode)
		return
	}
	o.engine = resp.Header.Get("X-Kvrouter-Worker")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "data: [DONE]":
			return
		case strings.HasPrefix(line, `data: {"error"`):
			o.unknown, o.err = true, line
			return
		}
	}
	o.unknown, o.err = true, fmt.Sprintf("stream ended without [DONE]: %v", sc.Err())
}

// checkServedAfter fails the test for any request sent after the time
// since (described by what) that was not served in full.
func checkServedAfter(t *testing.T, h *history, since int64, what string) {
	t.Helper()
	after, failed := 0, 0
	for _, o := range h.ops {
		if o.call <= since {
			continue
		}
		after++
		if o.unknown {
			failed++
			t.Errorf("request of %s sent %v after %s failed: %s", o.session, time.Duration(o.call-since), what, o.err)
		}
	}
	if after < 50 {
		t.Fatalf("only %d requests after %s: too few to mean anything", after, what)
	}
	t.Logf("%d requests sent after %s, %d failed", after, what, failed)
}

// checkInFlightEndedBy fails the test for a request in flight after the
// fault (at from) and sent before at that ended more than bound after at,
// and returns how many of them failed. The requests of a dead engine must
// end when it dies, and those of a paused one when the nodes drop it, not
// at the liveness timeout (3 s) or when the client gives up. A stream
// takes about 50 ms here, so a bound of 2 s leaves a loaded machine a wide
// margin.
func checkInFlightEndedBy(t *testing.T, h *history, from, at int64, bound time.Duration) (cut int) {
	t.Helper()
	for _, o := range h.ops {
		if o.call < at && o.ret > from {
			if late := time.Duration(o.ret - at); late > bound {
				t.Errorf("request of %s in flight at the fault ended %v late (%s)", o.session, late, o.err)
			}
			if o.unknown {
				cut++
			}
		}
	}
	t.Logf("%d requests in flight at the fault failed", cut)
	return cut
}

// checkSessionsMovedOnlyOffTheDead fails the test for a session whose
// served requests, in call order, change engine other than once, away from
// the dead engine.
func checkSessionsMovedOnlyOffTheDead(t *testing.T, h *history, dead string) {
	t.Helper()
	served := map[string][]op{}
	for _, o := range h.ops {
		if !o.unknown {
			served[o.session] = append(served[o.session], o)
		}
	}
	moved := 0
	for s, ops := range served {
		slices.SortFunc(ops, func(a, b op) int { return int(a.call - b.call) })
		changes := 0
		for i := 1; i < len(ops); i++ {
			if ops[i].engine == ops[i-1].engine {
				continue
			}
			changes++
			if !strings.HasPrefix(ops[i-1].engine, dead) || changes > 1 {
				t.Errorf("session %s moved from %s to %s", s, ops[i-1].engine, ops[i].engine)
			}
		}
		moved += changes
	}
	t.Logf("%d sessions served, %d moved off the dead engine", len(served), moved)
}

// checkLoadFreed waits until no node books load on an engine or keeps
// the dead engine's gauges: the dead engine goes at the liveness timeout
// (3 s); 30 s is the failure bound.
func checkLoadFreed(t *testing.T, d *dc, dead string) {
	t.Helper()
	waittest.UntilNil(t, 30*time.Second, "every node freed its load and dropped the dead engine's gauges", func() error {
		for _, m := range d.members {
			for _, line := range metricLines(t, m, "kvrouter_worker_active_") {
				if strings.Contains(line, `worker="`+strings.TrimSuffix(dead, "/")+`"`) {
					return fmt.Errorf("%s still reports the dead engine: %s", m.id, line)
				}
				if !strings.HasSuffix(line, " 0") {
					return fmt.Errorf("%s books load after the run: %s", m.id, line)
				}
			}
		}
		return nil
	})
}

// metricLines returns the samples of m's /metrics whose name starts with
// prefix.
func metricLines(t *testing.T, m *member, prefix string) []string {
	t.Helper()
	resp, err := http.Get("http://" + m.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// metricSum adds up the samples of metric name on m.
func metricSum(t *testing.T, m *member, name string) float64 {
	t.Helper()
	var sum float64
	for _, line := range metricLines(t, m, name) {
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
