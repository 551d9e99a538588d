package chaos

import (
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"
)

// eventRig is a node process fronting three vLLM-wire engines declared
// statically, and the prompts sent through it.
type eventRig struct {
	t       *testing.T
	base    string
	engines []*vllmEngine
	sent    [][]uint32
	r       *rand.Rand
	root    []uint32
}

func startEventRig(t *testing.T) *eventRig {
	t.Helper()
	engines := []*vllmEngine{startVLLMEngine(t, 1), startVLLMEngine(t, 2), startVLLMEngine(t, 3)}
	var args []string
	for _, e := range engines {
		args = append(args, "--engine", e.declaration())
	}
	g := &eventRig{t: t, base: startNodeProcess(t, args...), engines: engines, r: rand.New(rand.NewPCG(seed(), 8))}
	eventually(t, "three engines routable", func() bool { return len(explainDepths(t, g.base, tokensFrom(g.r, blockSize))) == 3 })
	g.root = tokensFrom(g.r, 8*blockSize)
	return g
}

// send posts a prompt sharing the rig's root prefix and returns the engine.
func (g *eventRig) send() string {
	p := append(append([]uint32(nil), g.root...), tokensFrom(g.r, blockSize+len(g.sent)%blockSize)...)
	g.sent = append(g.sent, p)
	return post(g.t, g.base, p)
}

func (g *eventRig) byWorker(w string) *vllmEngine {
	for _, e := range g.engines {
		if e.worker.String() == w {
			return e
		}
	}
	g.t.Fatalf("served by %q, not a declared engine", w)
	return nil
}

// waitIndexMatches waits until the node's index equals every engine's
// cache and returns how long that took.
func (g *eventRig) waitIndexMatches(what string) time.Duration {
	start := time.Now()
	eventually(g.t, what, func() bool { return indexMatches(g.t, g.base, g.engines, g.sent) })
	return time.Since(start)
}

// TestS08EventGap: one engine drops one, two, then three event batches
// (kept in its replay buffer but never published, the engine's test hook
// for a lost subsequence): three sequence gaps. Every gap is detected (the gap counter grows by
// three), each is repaired by a replay, and afterwards the node's index
// equals every engine's true cache. Runs in make test (a node process and
// three in-process engines, a few seconds).
func TestS08EventGap(t *testing.T) {
	if testing.Short() {
		t.Skip("node process; run without -short")
	}
	g := startEventRig(t)
	rep := newReport(t, "S08 EventGap", "1 node, 3 vLLM-wire engines (ZMQ events + replay)")
	owner := g.byWorker(g.send())
	g.waitIndexMatches("the first prompt indexed")
	gaps0 := metric(t, g.base, "kvrouter_vllmevents_gaps_total")
	const k = 3
	var detect []time.Duration
	for i := range k {
		if err := owner.srv.DropBatches(0, 1+i); err != nil {
			t.Fatal(err)
		}
		for range 1 + i {
			if w := g.send(); w != owner.worker.String() { // published to nobody
				t.Fatalf("a prompt with the shared prefix went to %s, not %s", w, owner.worker)
			}
		}
		start := time.Now()
		g.send() // the first batch after the gap reveals it
		eventually(t, "the gap detected", func() bool {
			return metric(t, g.base, "kvrouter_vllmevents_gaps_total")-gaps0 >= float64(i+1)
		})
		detect = append(detect, time.Since(start))
	}
	took := g.waitIndexMatches("the node's index to equal every engine's cache after the gaps")
	got := metric(t, g.base, "kvrouter_vllmevents_gaps_total") - gaps0
	rep.Ops["ok"] = len(g.sent)
	rep.figure("gaps_detected", fmt.Sprintf("%v/%d", got, k))
	rep.figure("detect_max_ms", slices.Max(detect).Milliseconds())
	rep.converged(took)
	if got != k {
		rep.verdict("gap_detection", "missed")
		t.Fatalf("%v gaps counted, want %d", got, k)
	}
	rep.verdict("gap_detection", "100%")
	rep.verdict("index_equals_caches", "ok")
}

// TestS09EventSourceReset: an engine restarts with an empty cache and its
// event sequence starting again at 0, on the same addresses. The node must
// drop that engine's entries (no phantom hits): its index ends equal to
// every engine's true cache, which for the restarted one holds none of the
// prompts sent before. Runs in make test (a few seconds).
func TestS09EventSourceReset(t *testing.T) {
	if testing.Short() {
		t.Skip("node process; run without -short")
	}
	g := startEventRig(t)
	rep := newReport(t, "S09 EventSourceReset", "1 node, 3 vLLM-wire engines (ZMQ events + replay)")
	owner := g.byWorker(g.send())
	for range 5 {
		g.send()
	}
	g.waitIndexMatches("the prompts indexed")
	if d := explainDepths(t, g.base, g.root)[owner.worker.String()]; d != 8 {
		t.Fatalf("before the reset the owner holds %d blocks of the root, want 8", d)
	}
	// Restart the owner on the same addresses: same identity, empty cache,
	// sequence from 0.
	owner.cancel()
	err := <-owner.done
	owner.done <- err
	hostPort := owner.url[len("http://"):]
	if _, _, err := net.SplitHostPort(hostPort); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fresh := startVLLMEngineAt(t, 1, hostPort, owner.pub, owner.rpl)
	for i, e := range g.engines {
		if e == owner {
			g.engines[i] = fresh
		}
	}
	took := g.waitIndexMatches("the restarted engine's entries cleared")
	rep.converged(took)
	left := explainDepths(t, g.base, g.root)[fresh.worker.String()]
	rep.figure("stale_entries_after_reset", left)
	rep.Ops["ok"] = len(g.sent)
	rep.verdict("index_equals_caches", "ok")
	t.Logf("reset cleared in %v", time.Since(start))
}
