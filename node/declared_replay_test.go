package node_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/node"
)

// TestDeclaredEngineReplayedBatchIsRouted: a batch that only the
// engine's replay buffer holds reaches the index through the gap's
// replay, and requests sharing its prefix go to the engine caching it.
func TestDeclaredEngineReplayedBatchIsRouted(t *testing.T) {
	f, a, _ := startVLLMFleet(t, 0, "")
	warm := seq(5000, 4*16)
	a.cache(t, warm)
	f.indexed(a, warm)
	p, next := seq(10000, 10*16), seq(20000, 2*16)
	withheld(t, a, p, next)
	f.indexed(a, warm, p, next)
	f.routedTo(a, p)
}

// TestDeclaredEngineReplayAfterItsIndexEntryWasDropped: the engine
// expired (its probes failed) and came back, so the node dropped its
// blocks and cursor under the subscriber. The batch that only the replay
// delivers must still reach the index, and so must the blocks the engine
// cached before it expired: the subscriber resyncs the engine from its
// replay buffer.
func TestDeclaredEngineReplayAfterItsIndexEntryWasDropped(t *testing.T) {
	f, a, _ := startVLLMFleet(t, 0, "")
	warm := seq(5000, 4*16)
	a.cache(t, warm)
	f.indexed(a, warm)
	a.sick.Store(true)
	waitUntil(t, 10*time.Second, "the engine expired", func() bool {
		m := f.cachedBlocks(warm)
		_, ok := m[a.worker]
		return m != nil && !ok
	})
	a.sick.Store(false)
	waitUntil(t, 10*time.Second, "the engine back", func() bool { _, ok := f.cachedBlocks(warm)[a.worker]; return ok })
	p, next := seq(10000, 10*16), seq(20000, 2*16)
	withheld(t, a, p, next)
	f.indexed(a, warm, p, next)
	f.routedTo(a, p)
}

// TestDeclaredEngineReplayAfterMoreLiveBatches: the replay's answer
// comes after the engine published more batches live, so the replay
// delivers them too and their live copies are dropped as duplicates.
func TestDeclaredEngineReplayAfterMoreLiveBatches(t *testing.T) {
	f, a, _ := startVLLMFleet(t, 0, "")
	warm := seq(5000, 4*16)
	a.cache(t, warm)
	f.indexed(a, warm)
	asked, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	if err := a.srv.InterceptReplays(0, func(uint64) bool {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
		return true
	}); err != nil {
		t.Fatal(err)
	}
	dup0 := f.metric("kvrouter_vllmevents_duplicates_total", "")
	p, next := seq(10000, 10*16), seq(20000, 2*16)
	withheld(t, a, p, next)
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the node never asked for a replay")
	}
	later := [][]int{seq(30000, 3*16), seq(40000, 3*16)}
	for _, l := range later {
		a.cache(t, l) // published live while the replay waits
	}
	once.Do(func() { close(release) })
	f.indexed(a, warm, p, next, later[0], later[1])
	f.routedTo(a, p)
	// The live batch that revealed the gap and the two published while
	// the replay waited came in the replay too.
	if d := f.metric("kvrouter_vllmevents_duplicates_total", "") - dup0; d != 3 {
		t.Fatalf("%v live batches dropped as replayed already, want 3", d)
	}
	if n := f.metric("kvrouter_vllmevents_gaps_total", `repair="replay"`); n != 1 {
		t.Fatalf("%v gaps repaired by replay, want 1", n)
	}
}

// TestDeclaredEngineReplayBufferRolledOver: the engine keeps two batches
// and three are withheld, so the gap's replay returns only some of the
// missing batches. The node resyncs the engine (a clear, then the
// engine's whole buffer), says so in its metrics, and its index holds no
// block the engine does not hold and every block the buffer revealed.
func TestDeclaredEngineReplayBufferRolledOver(t *testing.T) {
	f, a, _ := startVLLMFleet(t, 2, "")
	warm := seq(5000, 4*16)
	a.cache(t, warm)
	f.indexed(a, warm)
	lost := [][]int{seq(10000, 5*16), seq(11000, 5*16)}
	kept, next := seq(12000, 5*16), seq(20000, 2*16)
	if err := a.srv.DropBatches(0, 3); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(lost, kept) {
		a.cache(t, p)
	}
	a.cache(t, next) // the buffer now holds kept's batch and this one
	f.indexed(a, kept, next)
	for _, p := range append(lost, warm, kept, next) {
		if got, held := f.cachedBlocks(p)[a.worker], a.depth(t, p); got > held {
			t.Fatalf("the index claims %d blocks of a prompt the engine holds %d of", got, held)
		}
	}
	for _, p := range append(lost, warm) {
		if got := f.cachedBlocks(p)[a.worker]; got != 0 {
			t.Fatalf("the index kept %d blocks from before the lost batches", got)
		}
	}
	f.routedTo(a, kept)
	if n := f.metric("kvrouter_vllmevents_resyncs_total", `reason="rolled_over"`); n != 1 {
		t.Fatalf("%v resyncs for a rolled-over buffer, want 1", n)
	}
	if n := f.metric("kvrouter_vllmevents_gaps_total", `repair="resync"`); n != 1 {
		t.Fatalf("%v gaps repaired by a resync, want 1", n)
	}
}

// TestDeclaredEngineReplaySocketSilent: the engine's replay socket does
// not answer the gap's request. The node waits the declared replay
// timeout, then resyncs the engine from its buffer, which answers again.
func TestDeclaredEngineReplaySocketSilent(t *testing.T) {
	f, a, _ := startVLLMFleet(t, 0, ",replay-timeout=1s")
	warm := seq(5000, 4*16)
	a.cache(t, warm)
	f.indexed(a, warm)
	var swallowed atomic.Bool
	if err := a.srv.InterceptReplays(0, func(uint64) bool { return !swallowed.CompareAndSwap(false, true) }); err != nil {
		t.Fatal(err)
	}
	p, next := seq(10000, 10*16), seq(20000, 2*16)
	withheld(t, a, p, next)
	// A resync whose replay failed too (a loaded machine) is retried on
	// a later batch: once the first resync is done, the engine publishes
	// another batch at each poll until the index is whole.
	nudge := 0
	waitUntil(t, 20*time.Second, "the engine's blocks after the silent replay", func() bool {
		for _, q := range [][]int{warm, p, next} {
			if f.cachedBlocks(q)[a.worker] == len(q)/16 {
				continue
			}
			if f.metric("kvrouter_vllmevents_resyncs_total", `reason="replay_failed"`) > 0 {
				nudge++
				a.cache(t, seq(50000+100*nudge, 16))
			}
			return false
		}
		return true
	})
	f.routedTo(a, p)
	if !swallowed.Load() {
		t.Fatal("no replay request was swallowed")
	}
	if n := f.metric("kvrouter_vllmevents_resyncs_total", `reason="replay_failed"`); n != 1 {
		t.Fatalf("%v resyncs after a silent replay, want 1", n)
	}
}

// TestDeclaredEngineReplayInCluster runs the steps in a raft cluster,
// where only the leader ingests a declared engine's events: the first
// batch after the leader is ready, and a batch that only the replay
// delivers right after the leader changed (possibly while no member took
// events), reach every member's index.
func TestDeclaredEngineReplayInCluster(t *testing.T) {
	a, b := startVLLMEngine(t, 1, 0), startVLLMEngine(t, 2, 0)
	c := startDCCluster(t, 0, func(cfg *node.Config) { cfg.Engines = []string{a.declaration(), b.declaration()} })
	members := func() []*fleet {
		var out []*fleet
		for i, n := range c.nodes {
			if c.stops[i] != nil {
				out = append(out, &fleet{t: t, base: "http://" + n.Addr().String()})
			}
		}
		return out
	}
	warm := seq(5000, 4*16)
	for _, f := range members() {
		waitUntil(t, 10*time.Second, "two routable engines", func() bool { return len(f.cachedBlocks(seq(1, 16))) == 2 })
	}
	waitSubscribed(t, a, b)
	a.cache(t, warm)
	for _, f := range members() {
		f.indexed(a, warm)
	}
	old := c.leader()
	c.stop(old)
	waitUntil(t, 20*time.Second, "a new leader", func() bool { l := c.leader(); return l >= 0 && l != old })
	p, next := seq(10000, 10*16), seq(20000, 2*16)
	withheld(t, a, p, next)
	for _, f := range members() {
		f.indexed(a, warm, p, next)
	}
	members()[0].routedTo(a, p)
}
