package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// streamEnd is how a streamed completion ended, as the client saw it.
type streamEnd string

const (
	endDone  streamEnd = "done"  // [DONE] arrived
	endError streamEnd = "error" // an error event arrived, then the body ended
	endCut   streamEnd = "cut"   // the body ended or failed without either: not clean
)

// streamed is one streamed completion through a node.
type streamed struct {
	session, worker string
	status          int
	end             streamEnd
	errType         string
	err             error
}

// openStream posts a streamed completion of maxTokens tokens for session,
// calls headers once the answer's status line arrived (or the request
// failed), and reads the stream to its end.
func openStream(c *http.Client, base, session string, seed, maxTokens int, headers func()) streamed {
	s := streamed{session: session, end: endCut}
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": prompt(seed, 4),
		"max_tokens": maxTokens, "stream": true})
	req, _ := http.NewRequest("POST", "http://"+base+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", session)
	resp, err := c.Do(req)
	headers()
	if err != nil {
		s.err = err
		return s
	}
	defer resp.Body.Close()
	s.status, s.worker = resp.StatusCode, resp.Header.Get("X-Kvrouter-Worker")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "data: [DONE]":
			s.end = endDone
		case strings.HasPrefix(line, `data: {"error"`):
			var e struct {
				Error struct {
					Type string `json:"type"`
					Code string `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e)
			s.end, s.errType = endError, e.Error.Code
		}
	}
	if err := sc.Err(); err != nil {
		s.end, s.err = endCut, err
	}
	return s
}

// adminStatus asks a member's cluster API for its status.
func adminStatus(addr string) (*kvrpb.AdminStatusResponse, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return kvrpb.NewClusterAdminClient(conn).Status(ctx, &kvrpb.AdminStatusRequest{})
}

// sessionEngine asks a node where a session is bound ("" when unbound or
// on failure).
func sessionEngine(node, session string) string {
	resp, err := http.Get("http://" + node + "/v1/sessions/" + session)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct {
		Engine string `json:"engine"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil {
		return ""
	}
	return v.Engine
}

// readyProbe records what GET /ready answered over time: 200, 503, or 0
// for a refused connection.
type readyProbe struct {
	mu      sync.Mutex
	answers []int
}

func (p *readyProbe) run(addr string, stop <-chan struct{}) {
	c := http.Client{Timeout: 500 * time.Millisecond}
	for {
		select {
		case <-stop:
			return
		default:
		}
		code := 0
		if resp, err := c.Get("http://" + addr + "/ready"); err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		}
		p.mu.Lock()
		if n := len(p.answers); n == 0 || p.answers[n-1] != code {
			p.answers = append(p.answers, code)
		}
		p.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDrainLeaderDuringStreams sends SIGTERM to the raft leader while 50
// session streams run through it, half of them shorter than its drain
// deadline (--drain-timeout 2s) and half much longer. The node must turn
// not ready before its listener closes (--drain-ready-delay), every
// stream must end with [DONE] or with a shutting_down error event, the
// leadership must have moved to another member before the process exits,
// and every binding a client saw acknowledged (a 200 naming its engine)
// must be on the surviving members.
func TestDrainLeaderDuringStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process drain; run without -short")
	}
	const streams = 50
	d := startDCWith(t, "dcd", 3, func(d *dc, ctx context.Context, wg *sync.WaitGroup) {
		for id := range 2 {
			startEngineAt(t, ctx, wg, d.nats, d.name, uint64(id+1), 1)
		}
	}, "--drain-timeout", "2s", "--drain-ready-delay", "300ms")
	l := d.leader()
	c := &http.Client{Timeout: 30 * time.Second}
	results := make([]streamed, streams)
	var started, done sync.WaitGroup
	started.Add(streams)
	for i := range streams {
		maxTokens := 20 // well within the deadline
		if i%2 == 1 {
			maxTokens = 2000 // about 16 s of decoding: cut at the deadline
		}
		done.Go(func() {
			results[i] = openStream(c, l.http, fmt.Sprintf("drain-%d", i), i, maxTokens, started.Done)
		})
	}
	started.Wait()

	stop := make(chan struct{})
	var probe readyProbe
	var newLeader string
	var probes sync.WaitGroup
	probes.Go(func() { probe.run(l.http, stop) })
	probes.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, m := range d.members {
				if m == l {
					continue
				}
				st, err := adminStatus(m.api)
				select {
				case <-l.exited:
					return // only a leader named while the old one lived counts
				default:
				}
				if err == nil && st.GetLeaderId() != "" && st.GetLeaderId() != l.id && newLeader == "" {
					newLeader = st.GetLeaderId()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	sent := time.Now()
	d.signal(l, syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not exit within 30s of SIGTERM")
	}
	exitedAfter := time.Since(sent)
	close(stop)
	probes.Wait()
	l.cmd = nil
	done.Wait()
	seenBeforeExit := newLeader // the probe stopped recording when the leader exited

	counts := map[streamEnd]int{}
	for _, s := range results {
		if s.err != nil && s.status == 0 {
			t.Errorf("session %s: request failed before any answer: %v", s.session, s.err)
			continue
		}
		counts[s.end]++
		switch {
		case s.status != 200:
			t.Errorf("session %s: status %d", s.session, s.status)
		case s.end == endCut:
			t.Errorf("session %s: stream ended without [DONE] or an error event (%v)", s.session, s.err)
		case s.end == endError && s.errType != "shutting_down":
			t.Errorf("session %s: error event %q, want shutting_down", s.session, s.errType)
		}
	}
	t.Logf("SIGTERM to exit %v; streams: %d done, %d ended by a shutting_down event, %d cut; /ready answers %v",
		exitedAfter.Round(time.Millisecond), counts[endDone], counts[endError], counts[endCut], probe.answers)
	if counts[endDone] == 0 || counts[endError] == 0 {
		t.Errorf("want both completed and deadline-cut streams, got %v", counts)
	}
	checkReadyBeforeClose(t, probe.answers)
	if seenBeforeExit == "" {
		t.Error("no other member named a new leader before the old one exited")
	}
	if !logHas(t, l.log, "leadership transferred") {
		t.Error(`the leader's log has no "leadership transferred" line`)
	}
	checkBindingsKept(t, d, l, results)
}

// checkReadyBeforeClose checks the drain's order as a load balancer sees
// it: /ready turns 503 while the node still answers, and only then does
// the listener close; it never turns 200 again.
func checkReadyBeforeClose(t *testing.T, answers []int) {
	t.Helper()
	i503 := -1
	for i, a := range answers {
		switch {
		case a == 503 && i503 < 0:
			i503 = i
		case a == 200 && i503 >= 0:
			t.Errorf("/ready answered 200 after 503: %v", answers)
		case a == 0 && i503 < 0:
			t.Errorf("the listener closed before /ready turned 503: %v", answers)
		}
	}
	if i503 < 0 {
		t.Errorf("/ready never answered 503 during the drain: %v", answers)
	}
}

// checkBindingsKept checks every acknowledged binding on the members
// other than gone.
func checkBindingsKept(t *testing.T, d *dc, gone *member, results []streamed) {
	t.Helper()
	for _, m := range d.members {
		if m == gone {
			continue
		}
		d.waitReady(m, 20*time.Second)
		lost := 0
		for _, s := range results {
			if s.status != 200 || s.worker == "" {
				continue
			}
			if got := sessionEngine(m.http, s.session); got != s.worker {
				lost++
				t.Errorf("%s: session %s bound to %q, acknowledged on %s", m.id, s.session, got, s.worker)
			}
		}
		if lost > 0 {
			t.Errorf("%s lost %d acknowledged bindings", m.id, lost)
		}
	}
}

// logHas reports whether a member's log holds substr.
func logHas(t *testing.T, path, substr string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), substr)
}
