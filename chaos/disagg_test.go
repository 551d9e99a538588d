package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// Disaggregated serving through a cluster: two prefill and two decode
// engine processes (mockers in those roles, handing off vLLM's way) behind
// three node processes.
const (
	// disaggGroups shared prefixes of disaggPrefix tokens, each request
	// adding disaggSuffix tokens of its own: the cached prefix is worth
	// far more to the cost model than a few requests' prefill load.
	disaggGroups = 6
	disaggPrefix = 512
	disaggSuffix = 16
)

// disaggOp is one request of the disaggregated workload.
type disaggOp struct {
	group           int
	call            time.Time
	status          int
	prefill, decode string
	// complete: 200 and the whole stream up to [DONE]; half: 200 and a
	// stream cut off or ended by an error event, the one outcome a failed
	// prefill must never cause.
	complete, half bool
	err            string
}

// disaggPrompt is a request of group g, made unique by n.
func disaggPrompt(g, n int) []int {
	out := make([]int, 0, disaggPrefix+disaggSuffix)
	for i := range disaggPrefix {
		out = append(out, 1+g*10000+i)
	}
	for i := range disaggSuffix {
		out = append(out, 500000+n*disaggSuffix+i)
	}
	return out
}

// disaggStream streams one request of group g through m and reads it
// whole.
func disaggStream(c *http.Client, m *member, g, n int) disaggOp {
	o := disaggOp{group: g, call: time.Now()}
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": disaggPrompt(g, n), "max_tokens": 16, "stream": true})
	resp, err := c.Post("http://"+m.http+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		o.err = err.Error()
		return o
	}
	defer resp.Body.Close()
	o.status, o.prefill, o.decode = resp.StatusCode, resp.Header.Get("X-Kvrouter-Prefill-Worker"), resp.Header.Get("X-Kvrouter-Worker")
	if resp.StatusCode != http.StatusOK {
		msg, _ := bufio.NewReader(resp.Body).ReadString(0)
		o.err, o.half = msg, strings.Contains(msg, "data:")
		return o
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "data: [DONE]":
			o.complete = true
			return o
		case strings.HasPrefix(line, `data: {"error"`):
			o.half, o.err = true, line
			return o
		}
	}
	o.half, o.err = true, fmt.Sprintf("stream ended without [DONE]: %v", sc.Err())
	return o
}

// TestDisaggPrefillKill: every request is served by one prefill and one
// decode engine; the requests of a shared prefix are prefilled on the
// engine that caches it; and when a prefill engine is killed mid-run, no
// request is lost: each is served whole (its prefill moved to the other
// prefill engine) or refused with a clean 5xx, never half streamed.
func TestDisaggPrefillKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster; run without -short")
	}
	sd := seed()
	t.Logf("seed %d (KVRTEST_CHAOS_SEED replays it)", sd)
	logs := t.TempDir()
	var engines []*engineProc
	d := startDCWith(t, "dc1", 3, func(d *dc, _ context.Context, _ *sync.WaitGroup) {
		for id := uint64(1); id <= 4; id++ {
			role := "decode"
			if id <= 2 {
				role = "prefill"
			}
			engines = append(engines, startEngineProcessOf(t, binary, d, id, logs, "--role", role))
		}
	})
	waitWorkers(t, d, 4)
	c := &http.Client{Timeout: 10 * time.Second}
	caching := placeGroups(t, d, c)
	// The nodes add what engines report beyond their own bookings, and
	// the prefill engine's report sent while it computed a group's first
	// prompt would outweigh the group's cached prefix until the next.
	waitIdleReports(t, d, 1, 2)

	warm := runDisaggLoad(d, c, sd, phase(2*time.Second))
	checkPairs(t, warm)
	checkCachedPrefill(t, warm, caching)

	// The victim is the engine caching the first group's prefix, so that
	// prefills are running on it when it dies.
	victim := engines[0]
	if caching[0] == "2/0" {
		victim = engines[1]
	}
	ctx, cancel := context.WithCancel(context.Background())
	var load []disaggOp
	done := make(chan struct{})
	go func() { defer close(done); load = runDisaggLoadCtx(ctx, d, c, sd+1) }()
	time.Sleep(phase(time.Second))
	killedAt := time.Now()
	victim.kill()
	t.Logf("prefill engine %d killed", victim.id)
	time.Sleep(phase(2 * time.Second))
	cancel()
	<-done
	checkNothingLost(t, load, killedAt)
	var unreachable float64
	for _, m := range d.members {
		unreachable += metricSum(t, m, "kvrouter_router_engine_unreachable_total")
	}
	if unreachable < 1 {
		t.Fatal("no prefill hop found the dead engine: the scenario did not exercise the failover")
	}
	t.Logf("prefill hops that found the dead engine and moved to the other: %v", unreachable)
}

// waitIdleReports waits until each of the engines has sent two
// heartbeats in a row reporting no active prefill, so that every node has
// received one.
func waitIdleReports(t *testing.T, d *dc, engines ...uint64) {
	t.Helper()
	nc, err := nats.Connect(d.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync(kvrpb.SubjectHeartbeatAll(d.name))
	if err != nil {
		t.Fatal(err)
	}
	idle := map[uint64]int{}
	deadline := time.Now().Add(10 * time.Second)
	for done := 0; done < len(engines); {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("waiting for idle heartbeats of engines %v: %v (idle in a row: %v)", engines, err, idle)
		}
		var hb kvrpb.Heartbeat
		if proto.Unmarshal(m.Data, &hb) != nil || !slices.Contains(engines, hb.EngineId) {
			continue
		}
		busy := slices.ContainsFunc(hb.Loads, func(l *kvrpb.RankLoad) bool { return l.ActivePrefillTokens > 0 })
		switch {
		case busy:
			idle[hb.EngineId] = 0
		case idle[hb.EngineId] < 2:
			if idle[hb.EngineId]++; idle[hb.EngineId] == 2 {
				done++
			}
		}
	}
}

// waitWorkers waits until every member counts n engine ranks.
func waitWorkers(t *testing.T, d *dc, n float64) {
	t.Helper()
	for _, m := range d.members {
		waittest.Until(t, 30*time.Second, m.id+" counts every engine rank", func() bool {
			return metricSum(t, m, "kvrouter_workers") == n
		})
	}
}

// placeGroups sends each group's first request and waits until every
// member's index holds its prefix on the prefill engine that served it;
// it returns that engine per group.
func placeGroups(t *testing.T, d *dc, c *http.Client) []string {
	t.Helper()
	caching := make([]string, disaggGroups)
	for g := range disaggGroups {
		o := disaggStream(c, d.members[g%len(d.members)], g, g)
		if !o.complete {
			t.Fatalf("group %d's first request: status %d %s", g, o.status, o.err)
		}
		caching[g] = o.prefill
		for _, m := range d.members {
			waitCached(t, m, g, o.prefill)
		}
	}
	t.Logf("prefill engines caching the groups: %v", caching)
	return caching
}

// waitCached polls m's /v1/route/explain until its index holds group g's
// prefix on engine.
func waitCached(t *testing.T, m *member, g int, engine string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": disaggPrompt(g, 0)})
	waittest.UntilNil(t, 10*time.Second, fmt.Sprintf("%s's index holds group %d's prefix on %s", m.id, g, engine), func() error {
		var ex struct {
			Engines []struct {
				Engine string `json:"engine"`
				Cached int    `json:"cached_blocks"`
			} `json:"engines"`
		}
		resp, err := http.Post("http://"+m.http+"/v1/route/explain", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		err = json.NewDecoder(resp.Body).Decode(&ex)
		resp.Body.Close()
		if err != nil {
			return err
		}
		for _, e := range ex.Engines {
			if e.Engine == engine && e.Cached >= disaggPrefix/blockSize {
				return nil
			}
		}
		return fmt.Errorf("the index holds %+v", ex.Engines)
	})
}

// runDisaggLoad runs the workload for d.
func runDisaggLoad(d *dc, c *http.Client, sd uint64, dur time.Duration) []disaggOp {
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	return runDisaggLoadCtx(ctx, d, c, sd)
}

// runDisaggLoadCtx runs 6 clients sending requests of random groups
// through random members until ctx ends, and returns every request.
func runDisaggLoadCtx(ctx context.Context, d *dc, c *http.Client, sd uint64) []disaggOp {
	var mu sync.Mutex
	var ops []disaggOp
	var wg sync.WaitGroup
	for ci := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(sd, uint64(ci)))
			for n := 0; ctx.Err() == nil; n++ {
				o := disaggStream(c, d.pick(rng), rng.IntN(disaggGroups), 1000+ci*100000+n)
				mu.Lock()
				ops = append(ops, o)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ops
}

// checkPairs fails the test for a request not served whole by a prefill
// engine (1 or 2) and a decode engine (3 or 4).
func checkPairs(t *testing.T, ops []disaggOp) {
	t.Helper()
	if len(ops) < 50 {
		t.Fatalf("only %d requests: too few to mean anything", len(ops))
	}
	for _, o := range ops {
		p, dec := o.prefill, o.decode
		if !o.complete || !(strings.HasPrefix(p, "1/") || strings.HasPrefix(p, "2/")) || !(strings.HasPrefix(dec, "3/") || strings.HasPrefix(dec, "4/")) {
			t.Errorf("group %d: status %d prefill %q decode %q complete %v: %s", o.group, o.status, p, dec, o.complete, o.err)
		}
	}
	t.Logf("%d requests, each served by a prefill and a decode engine", len(ops))
}

// checkCachedPrefill fails the test for a request prefilled elsewhere than
// on the engine caching its group's prefix.
func checkCachedPrefill(t *testing.T, ops []disaggOp, caching []string) {
	t.Helper()
	for _, o := range ops {
		if o.complete && o.prefill != caching[o.group] {
			t.Errorf("group %d prefilled on %s, not on the caching %s", o.group, o.prefill, caching[o.group])
		}
	}
}

// checkNothingLost fails the test for a request half streamed, or failed
// otherwise than with a clean 5xx; and unless requests were served after
// the kill.
func checkNothingLost(t *testing.T, ops []disaggOp, killedAt time.Time) {
	t.Helper()
	served, refused, after := 0, 0, 0
	for _, o := range ops {
		switch {
		case o.half:
			t.Errorf("group %d half streamed (status %d, prefill %q): %s", o.group, o.status, o.prefill, o.err)
		case o.complete:
			served++
			if o.call.After(killedAt) {
				after++
			}
		case o.status >= 500:
			refused++
		default:
			t.Errorf("group %d failed: status %d %s", o.group, o.status, o.err)
		}
	}
	if after < 20 {
		t.Fatalf("only %d requests served after the kill", after)
	}
	t.Logf("%d requests: %d served (%d sent after the kill), %d refused with a clean 5xx", len(ops), served, after, refused)
}
