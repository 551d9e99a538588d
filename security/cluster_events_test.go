package security

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// hugeBlocks is the blocks of each event of the probe's engine: within
// the wire's limit, over any raft entry (about 1.2 MB encoded).
const hugeBlocks = 60000

// TestClusterOversizedEventsKeepTheLogBounded reproduces the probe's
// engine: every event stores 60,000 blocks, which no raft entry can
// carry. Before, each such event left a gap, each gap a resync that wrote
// the rank's snapshot into the log, without end. Now each event is
// refused and counted, the resyncs back off, and the log grows by a
// bounded number of entries while the engine keeps sending.
func TestClusterOversizedEventsKeepTheLogBounded(t *testing.T) {
	natsURL := startNATS(t)
	n1 := newMember(t, "dc1", "n1")
	n1.bootstrap(t, nil, "--nats", natsURL)
	eng := startHugeEngine(t, natsURL, "dc1", 77)
	waitFor(t, 10*time.Second, "the engine registered", func() bool {
		return metric(n1.metrics(), "kvrouter_workers") >= 1
	})
	before := n1.status(t, nil).GetLastLogIndex()
	const events, every = 40, 100 * time.Millisecond
	start := time.Now()
	for range events {
		eng.emit(t)
		time.Sleep(every)
	}
	// Events that arrive while the rank waits for its next resync are
	// buffered and dropped with it, so not each one reaches the size
	// check; a loaded node may still be working through the emitted ones.
	var refused, backoffs float64
	waitFor(t, 30*time.Second, "the node refused an event and held back a resync", func() bool {
		refused = metric(n1.metrics(), "kvrouter_raft_events_refused_total", `reason="too_large"`)
		backoffs = metric(n1.metrics(), "kvrouter_raft_resync_backoffs_total")
		return refused >= 1 && backoffs >= 1
	})
	// The resync backoff doubles from a second: resyncs are allowed at
	// 0, 1, 3, 7 ... s. The emission takes 4 s here, longer on a loaded
	// machine, so the bound on resyncs counts the windows it opened.
	windows := 0
	for at := time.Duration(0); at <= time.Since(start); at = 2*at + time.Second {
		windows++
	}
	grown := n1.status(t, nil).GetLastLogIndex() - before
	t.Logf("%d events of %d blocks in %v: log grew by %d entries; %v events refused, %v resyncs held back",
		events, hugeBlocks, events*every, grown, refused, backoffs)
	if out := n1.p.out.String(); strings.Count(out, "KV event refused") != 1 || strings.Count(out, "resync refused") > windows {
		t.Fatalf("the refusals were not reported once (per rank, per backoff; %d backoff windows):\n%s", windows, out)
	}
	// A resync writes the rank's 60,000 blocks in about five entries; one
	// per event would be some 200 entries here. The backoff allows a
	// resync at 0, 1, 3 s: a few dozen at most, and five more entries
	// for each window a slow emission opened past those.
	if grown > 60+5*uint64(max(windows-3, 0)) {
		t.Fatalf("the raft log grew by %d entries for %d refused events", grown, events)
	}
}

// startNATS runs a NATS server in the test process whose payload limit
// admits the engine's 1.2 MB batches, as an operator's external server
// may.
func startNATS(t *testing.T) string {
	t.Helper()
	host, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	s, err := server.NewServer(&server.Options{Host: host, Port: p, MaxPayload: 8 << 20, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// hugeEngine is a kvrouter-protocol engine over NATS whose every event
// stores hugeBlocks blocks; its snapshot holds its latest event.
type hugeEngine struct {
	nc   *nats.Conn
	dc   string
	card *kvrpb.WorkerCard

	mu   sync.Mutex
	last routing.Event
}

func startHugeEngine(t *testing.T, url, dc string, id uint64) *hugeEngine {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	e := &hugeEngine{nc: nc, dc: dc, card: &kvrpb.WorkerCard{EngineId: id, DpSize: 1, Model: "m", BlockSize: 16,
		TotalKvBlocks: 1 << 20, MaxNumBatchedTokens: 8192, Device: kvrpb.DeviceKind_DEVICE_KIND_GPU,
		EndpointUrl: "http://127.0.0.1:9", Version: kvrpb.Version, Checksum: "huge", Incarnation: 1}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait(); nc.Close() })
	if _, err := nc.Subscribe(kvrpb.SubjectDiscover(dc), func(*nats.Msg) { e.pub(kvrpb.SubjectRegister(dc, id), e.card) }); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe(kvrpb.SubjectSnapshot(dc, id, 0), e.snapshot); err != nil {
		t.Fatal(err)
	}
	e.pub(kvrpb.SubjectRegister(dc, id), e.card)
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				e.heartbeat()
			}
		}
	})
	return e
}

func (e *hugeEngine) pub(subject string, m proto.Message) {
	if data, err := proto.Marshal(m); err == nil {
		_ = e.nc.Publish(subject, data)
	}
}

func (e *hugeEngine) heartbeat() {
	e.mu.Lock()
	last := e.last.ID
	e.mu.Unlock()
	e.pub(kvrpb.SubjectHeartbeat(e.dc, e.card.EngineId), &kvrpb.Heartbeat{EngineId: e.card.EngineId, CardChecksum: e.card.Checksum,
		Incarnation: 1, UnixNanos: time.Now().UnixNano(),
		Loads: []*kvrpb.RankLoad{{KvTotalBlocks: e.card.TotalKvBlocks, LastEventId: last}}})
}

// emit publishes the next event.
func (e *hugeEngine) emit(t *testing.T) {
	e.mu.Lock()
	id := e.last.ID + 1
	ev := routing.Event{Worker: routing.Worker{ID: routing.WorkerID(e.card.EngineId)}, ID: id, Kind: routing.EventStored, Tier: routing.TierDevice}
	for b := range uint64(hugeBlocks) {
		h := id<<32 | b + 1
		ev.Blocks = append(ev.Blocks, routing.StoredBlock{Engine: routing.EngineHash(h), Local: routing.LocalHash(h)})
	}
	e.last = ev
	e.mu.Unlock()
	e.pub(kvrpb.SubjectKV(e.dc, e.card.EngineId, 0), wire.EncodeBatch(ev.Worker, 1, []routing.Event{ev}))
	if err := e.nc.Flush(); err != nil {
		t.Fatal(fmt.Errorf("publishing event %d: %w", id, err))
	}
}

// snapshot answers a resync with the latest event.
func (e *hugeEngine) snapshot(m *nats.Msg) {
	e.mu.Lock()
	defer e.mu.Unlock()
	reply := &kvrpb.SnapshotReply{EngineId: e.card.EngineId, Incarnation: 1, LastEventId: e.last.ID}
	if e.last.ID > 0 {
		reply.Events = []*kvrpb.KVEvent{wire.EncodeEvent(&e.last)}
	}
	if data, err := proto.Marshal(reply); err == nil {
		_ = m.Respond(data)
	}
}
