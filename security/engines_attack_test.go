package security

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// TestEngineAttacks runs the attacks on a DC's engine registration against
// a real `kvrouter node` process (a single-member raft cluster with its
// embedded NATS server) and mocker engines: each must fail and show in a
// metric. The binary is built once for all of them.
func TestEngineAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	bin := binary
	t.Run("impersonation", func(t *testing.T) { testImpersonation(t, bin) })
	t.Run("card flood", func(t *testing.T) { testCardFlood(t, bin) })
}

// forgedCard is a well-formed card of engine id at url.
func forgedCard(id, incarnation uint64, url string) *kvrpb.WorkerCard {
	return &kvrpb.WorkerCard{EngineId: id, DpSize: 1, Model: engModel, BlockSize: 16, TotalKvBlocks: 1 << 14,
		MaxNumBatchedTokens: 8192, EndpointUrl: url, Checksum: fmt.Sprintf("forged-%d", incarnation),
		Incarnation: incarnation, Version: kvrpb.Version, Device: kvrpb.DeviceKind_DEVICE_KIND_GPU}
}

func natsPublish(t *testing.T, nc *nats.Conn, subject string, m proto.Message) {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subject, data); err != nil {
		t.Fatal(err)
	}
}

// An engine with credentials of its own republishes a real engine's id
// with a new incarnation and its own endpoint URL, as the probe of issue
// 19 did: on the victim's subject (the NATS server refuses it) and on its
// own (the router refuses it). Without credentials it cannot connect at
// all. No prompt reaches it, and every attempt is counted.
func testImpersonation(t *testing.T, bin string) {
	real1, real2, impostor := newEngIdentity(t, 1), newEngIdentity(t, 2), newEngIdentity(t, 99)
	n := startEngNode(t, bin, "--nats-users", usersFile(t, real1, real2, impostor))
	engines := newEngEngines(t)
	for _, id := range []engIdentity{real1, real2} {
		engines.start(t, n.nats, id.id, natsbus.ClientAuth{NKeySeedFile: id.seedFile})
	}
	engEventually(t, 30*time.Second, "the node is ready", n.ready)

	var stolen atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		stolen.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer trap.Close()

	if nc, err := nats.Connect("nats://" + n.nats); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected to the embedded NATS server")
	}
	opt, err := nats.NkeyOptionFromSeed(impostor.seedFile)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://"+n.nats, opt, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	forged := forgedCard(1, 0xbad, trap.URL)
	hb := &kvrpb.Heartbeat{EngineId: 1, Incarnation: forged.Incarnation, CardChecksum: forged.Checksum}
	for range 10 {
		natsPublish(t, nc, kvrpb.SubjectRegister(engDC, 1), forged)
		natsPublish(t, nc, kvrpb.SubjectRegister(engDC, 99), forged)
		natsPublish(t, nc, kvrpb.SubjectHeartbeat(engDC, 1), hb)
		natsPublish(t, nc, kvrpb.SubjectHeartbeat(engDC, 99), hb)
		time.Sleep(50 * time.Millisecond)
	}
	_ = nc.Flush()

	for i := range 40 {
		if status, _ := n.chat("", fmt.Sprintf("prompt %d of the impersonation test", i)); status != http.StatusOK {
			t.Fatalf("prompt %d: status %d", i, status)
		}
	}
	if got := stolen.Load(); got != 0 {
		t.Fatalf("%d of 40 prompts reached the impostor", got)
	}
	engEventually(t, 5*time.Second, "the attempts are counted", func() bool {
		return n.metric("kvrouter_nats_violations_total", "kind", "publish") >= 10 &&
			n.metric("kvrouter_nats_violations_total", "kind", "authentication") >= 1 &&
			n.metric("kvrouter_fleet_messages_refused_total", "message", "card", "reason", "identity") >= 10 &&
			n.metric("kvrouter_fleet_messages_refused_total", "message", "heartbeat", "reason", "identity") >= 10
	})
}

// 5,000 forged cards of engines that do not exist, published at full
// speed on a NATS server without authentication (the worst case: loopback
// defaults), and the node keeps running: the real engines stay registered
// through more than a liveness timeout, no session binding is lost or
// moved, and the flood shows in the refusal metric.
func testCardFlood(t *testing.T, bin string) {
	const sessions, flood = 20, 5000
	n := startEngNode(t, bin)
	engines := newEngEngines(t)
	for id := uint64(1); id <= 2; id++ {
		engines.start(t, n.nats, id, natsbus.ClientAuth{})
	}
	engEventually(t, 30*time.Second, "the node is ready", n.ready)
	bound := map[string]string{}
	for i := range sessions {
		s := fmt.Sprintf("session-%d", i)
		status, worker := n.chat(s, "first turn of "+s)
		if status != http.StatusOK || worker == "" {
			t.Fatalf("%s: status %d, worker %q", s, status, worker)
		}
		bound[s] = worker
	}
	engEventually(t, 5*time.Second, "the bindings are counted", func() bool {
		return n.metric("kvrouter_affinity_bindings") == sessions
	})
	invalidated := n.metric("kvrouter_affinity_events_total", "event", "invalidate")

	nc, err := nats.Connect("nats://"+n.nats, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	for i := range flood {
		id := uint64(100_000 + i)
		natsPublish(t, nc, kvrpb.SubjectRegister(engDC, id), forgedCard(id, 1, fmt.Sprintf("http://127.0.0.1:1/forged/%d", i)))
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d forged cards published in %v", flood, time.Since(start).Round(time.Millisecond))

	// Past the liveness timeout (3 s), an engine whose heartbeats had
	// starved behind the flood would be gone, and its bindings with it.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		for s, want := range bound {
			if status, got := n.chat(s, "next turn of "+s); status != http.StatusOK || got != want {
				t.Fatalf("%s during the flood: status %d on %q, bound to %q", s, status, got, want)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := n.metric("kvrouter_affinity_bindings"); got != sessions {
		t.Fatalf("%v bindings after the flood, want %d", got, sessions)
	}
	if got := n.metric("kvrouter_affinity_events_total", "event", "invalidate"); got != invalidated {
		t.Fatalf("%v bindings invalidated during the flood", got-invalidated)
	}
	refused := n.metric("kvrouter_fleet_messages_refused_total", "message", "card")
	if refused < flood/2 {
		t.Fatalf("only %v forged cards counted as refused", refused)
	}
	t.Logf("refused %v of %d forged cards", refused, flood)
}
