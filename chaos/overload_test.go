package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
)

// overloadPolicy is the burst test's policy file: two families, small
// per-worker queue limits so that the burst overflows them, and a max
// wait well beyond the burst's drain time.
const overloadPolicy = `
queue_policy: wspt
default_policy_family: standard
families:
  premium: {class: premium}
  standard: {class: standard}
classes:
  premium: {quantum: 1536, request_queue_limit_per_worker: 4, max_queue_wait_secs: 20}
  standard: {quantum: 512, request_queue_limit_per_worker: 2, max_queue_wait_secs: 20}
`

// TestOverloadBurst offers a three-node cluster a burst several times
// what its two slow engines can take at once, through every node: each
// request is served or refused with 529, the structured policy-class body
// and Retry-After; every acknowledged session binding survives; and every
// node's queue is empty once the burst is over.
func TestOverloadBurst(t *testing.T) {
	sd := seed()
	t.Logf("seed %d", sd)
	pfile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pfile, []byte(overloadPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDCWith(t, "dc1", 3, func(d *dc, ctx context.Context, wg *sync.WaitGroup) {
		d.extra = []string{"--router-policy-config", pfile, "--router-queue-threshold", "0", "--operator-token", adminToken}
		for id := range 2 {
			startSlowEngine(t, ctx, wg, d.nats, d.name, uint64(id+1))
		}
	})
	h := newHistory()
	burst := 60 * len(d.members)
	if phase(0) > 0 {
		burst *= 4 // make chaos: a longer burst
	}
	statuses := runBurst(t, d, h, burst)
	t.Logf("burst of %d: statuses %v", burst, statuses)
	if statuses[http.StatusOK] == 0 || statuses[529] == 0 {
		t.Errorf("want some requests served and some refused, got %v", statuses)
	}
	for code := range statuses {
		if code != http.StatusOK && code != 529 {
			t.Errorf("status %d: only 200 and 529 are expected under overload", code)
		}
	}
	waitDrained(t, d)
	if lost := verifyAll(t, d, h); len(lost) > 0 {
		t.Errorf("%d acknowledged bindings lost: %v", len(lost), lost[:min(5, len(lost))])
	}
	checkReplicatedThresholds(t, d)
}

// adminToken is the operator token of the burst test's nodes.
const adminToken = "chaos-operator-token-0123"

// checkReplicatedThresholds sets a model's busy thresholds through one
// node's operator API and reads them back from every node, then again
// after a node restarts.
func checkReplicatedThresholds(t *testing.T, d *dc) {
	t.Helper()
	body := `{"model":"` + mocker.DefaultModel + `","active_prefill_tokens_threshold_frac":3.5}`
	if status, b := admin(t, d.members[0], "POST", body); status != http.StatusOK {
		t.Fatalf("POST /busy_threshold: %d %s", status, b)
	}
	want := `"active_prefill_tokens_threshold_frac":3.5`
	check := func(when string) {
		for _, m := range d.members {
			deadline := time.Now().Add(5 * time.Second)
			for {
				status, b := admin(t, m, "GET", "")
				if status == http.StatusOK && strings.Contains(b, want) && strings.Contains(b, `"source":"runtime"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s reads %d %s", when, m.id, status, b)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	check("after the change")
	m := d.members[2]
	d.kill(m)
	d.restart(m)
	d.waitReady(m, 30*time.Second)
	check("after a restart")
}

// admin calls m's operator API.
func admin(t *testing.T, m *member, method, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+m.http+"/busy_threshold?model="+mocker.DefaultModel, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startSlowEngine is an in-process engine slow enough that a burst
// queues: prefill takes milliseconds, not microseconds.
func startSlowEngine(t *testing.T, ctx context.Context, wg *sync.WaitGroup, url, dcName string, id uint64) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	bus, err := natsbus.Open(natsbus.Config{URL: url}, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{DC: dcName, EngineID: id, Engine: mocker.Config{SpeedUp: 4, BlockSize: blockSize}}, bus.Conn, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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

// runBurst sends n requests at once, spread over the members, each of its
// own session and alternating classes; a 529 must carry the structured
// body and Retry-After. It returns the count per status.
func runBurst(t *testing.T, d *dc, h *history, n int) map[int]int {
	var (
		mu  sync.Mutex
		out = map[int]int{}
		wg  sync.WaitGroup
	)
	c := newClient(0, h)
	c.http.Timeout = 60 * time.Second
	for i := range n {
		wg.Go(func() {
			m := d.members[i%len(d.members)]
			status := burstRequest(t, c, m, i)
			mu.Lock()
			out[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// burstRequest sends request i of the burst and records it in the
// history when it was served.
func burstRequest(t *testing.T, c *client, m *member, i int) int {
	tokens := make([]int, 1024)
	for k := range tokens {
		tokens[k] = (i*7919 + k*31) % 32000
	}
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": tokens, "max_tokens": 4})
	req, _ := http.NewRequest("POST", "http://"+m.http+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("X-Session-ID", "s-"+strconv.Itoa(i))
	req.Header.Set("X-Dynamo-Meta-Policy-Class", []string{"premium", "standard"}[i%2])
	o := op{client: c.id, session: "s-" + strconv.Itoa(i), node: m.id, call: c.h.now()}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Errorf("request %d: %v", i, err)
		return 0
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	o.ret, o.status = c.h.now(), resp.StatusCode
	switch resp.StatusCode {
	case http.StatusOK:
		o.engine = resp.Header.Get("X-Kvrouter-Worker")
	case 529:
		checkRefusal(t, i, resp.Header, b)
		o.unknown, o.err = true, "529"
	default:
		o.unknown, o.err = true, fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	c.h.add(o)
	return resp.StatusCode
}

// checkRefusal checks a 529's Retry-After and structured body.
func checkRefusal(t *testing.T, i int, hdr http.Header, body []byte) {
	var v struct {
		Error struct {
			Code        string `json:"code"`
			PolicyClass string `json:"policy_class"`
			Limit       string `json:"limit"`
			Effective   int64  `json:"effective_limit"`
		} `json:"error"`
	}
	err := json.Unmarshal(body, &v)
	if ra, _ := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra <= 0 ||
		!strings.HasPrefix(v.Error.Code, "policy_class_") || v.Error.PolicyClass == "" {
		t.Errorf("request %d: 529 without Retry-After or the structured body: %q %s", i, hdr.Get("Retry-After"), body)
	}
}

// waitDrained waits until no node has a queued request.
func waitDrained(t *testing.T, d *dc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pending := 0.0
		for _, m := range d.members {
			pending += metricSum(t, m, "kvrouter_router_queue_pending_requests")
		}
		if pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v requests still queued after the burst", pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
