package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/oaiedge/oaiedgetest"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// complete sends one completion with token ids (on rank when rank >= 0).
func (h *harness) complete(ids []int64, rank string) {
	h.t.Helper()
	c := h.client()
	if rank != "" {
		c.Header = http.Header{HeaderDPRank: {rank}}
	}
	_, err := c.Create(context.Background(), "/v1/completions", map[string]any{"model": testModel, "prompt": ids, "max_tokens": 2})
	if err != nil {
		h.t.Fatal(err)
	}
}

// cacheModel replays events into the set of engine block ids they leave
// cached.
type cacheModel map[routing.EngineHash]routing.LocalHash

func (m cacheModel) apply(events []routing.Event) {
	for _, e := range events {
		switch e.Kind {
		case routing.EventStored:
			for _, b := range e.Blocks {
				m[b.Engine] = b.Local
			}
		case routing.EventRemoved:
			for _, h := range e.Removed {
				delete(m, h)
			}
		case routing.EventCleared:
			clear(m)
		}
	}
}

// drainBatches decodes the batches on sub up to the one that carries
// event last (the engine's last event id, once its requests ended) and
// returns their events.
func drainBatches(t *testing.T, sub *nats.Subscription, w routing.Worker, inc, last uint64) []routing.Event {
	t.Helper()
	var out []routing.Event
	for len(out) == 0 || out[len(out)-1].ID < last {
		gw, gotInc, events, err := wire.DecodeBatch(next(t, sub).Data)
		if err != nil || gw != w || gotInc != inc {
			t.Fatalf("batch: %v worker %v incarnation %d", err, gw, gotInc)
		}
		out = append(out, events...)
	}
	return out
}

// lastEventID is the id of the last event rank 0 published (or dropped):
// the engine publishes a step's events before the step ends requests,
// so once a request was answered, its events are out.
func (h *harness) lastEventID() uint64 {
	_, last := h.srv.ranks[0].load()
	return last
}

func TestEventsAndSnapshot(t *testing.T) {
	var kv *nats.Subscription
	h := startHarness(t, nil, func(nc *nats.Conn) { kv = subscribe(t, nc, kvrpb.SubjectKV(testDC, 42, 0)) })
	// 64 blocks of capacity: twelve distinct 6-block prompts force
	// evictions, so the stream carries Removed events too.
	for i := range 12 {
		h.complete(tokenRange(200*i, 6*testBlock+1), "")
	}
	w := routing.Worker{ID: 42}
	events := drainBatches(t, kv, w, h.srv.Incarnation(), h.lastEventID())
	removed := false
	for i, e := range events {
		if e.ID != uint64(i+1) {
			t.Fatalf("event %d has id %d: ids must be contiguous from 1", i, e.ID)
		}
		removed = removed || e.Kind == routing.EventRemoved
	}
	if len(events) == 0 || !removed {
		t.Fatalf("%d events, removed seen %v", len(events), removed)
	}
	// The first prompt's blocks carry the router's local hashes.
	locals, _ := routing.LocalHashes(nil, toU32(tokenRange(0, 3*testBlock)), testBlock, routing.HashSeed)
	if first := events[0]; first.Kind != routing.EventStored || first.HasParent || first.Blocks[0].Local != locals[0] {
		t.Fatalf("first event %+v, want root stored block with local %x", first, locals[0])
	}

	req, _ := proto.Marshal(&kvrpb.SnapshotRequest{EngineId: 42, Rank: 0})
	msg, err := h.obs.Request(kvrpb.SubjectSnapshot(testDC, 42, 0), req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gw, last, snap, err := wire.DecodeSnapshot(msg.Data)
	if err != nil || gw != w || last != events[len(events)-1].ID {
		t.Fatalf("snapshot: %v worker %v last %d, published up to %d", err, gw, last, events[len(events)-1].ID)
	}
	streamed, dumped := cacheModel{}, cacheModel{}
	streamed.apply(events)
	dumped.apply(snap)
	if len(streamed) == 0 || len(streamed) != len(dumped) {
		t.Fatalf("streamed cache %d blocks, snapshot %d", len(streamed), len(dumped))
	}
	for h, l := range streamed {
		if dumped[h] != l {
			t.Fatalf("block %x: stream local %x, snapshot %x", h, l, dumped[h])
		}
	}
}

func toU32(ids []int64) []uint32 {
	out := make([]uint32, len(ids))
	for i, v := range ids {
		out[i] = uint32(v)
	}
	return out
}

func TestSnapshotRefusals(t *testing.T) {
	h := startHarness(t, nil, nil)
	tests := []struct {
		name string
		data []byte
	}{
		{"wrong engine", mustMarshal(t, &kvrpb.SnapshotRequest{EngineId: 7})},
		{"wrong rank", mustMarshal(t, &kvrpb.SnapshotRequest{EngineId: 42, Rank: 1})},
		{"garbage", []byte{0xff, 0xff, 0xff}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := h.obs.Request(kvrpb.SubjectSnapshot(testDC, 42, 0), tc.data, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := wire.DecodeSnapshot(msg.Data); err == nil {
				t.Fatal("refusal not reported")
			}
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDroppedBatchMakesGap(t *testing.T) {
	var kv *nats.Subscription
	h := startHarness(t, nil, func(nc *nats.Conn) { kv = subscribe(t, nc, kvrpb.SubjectKV(testDC, 42, 0)) })
	if err := h.srv.DropBatches(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.DropBatches(5, 1); err == nil {
		t.Fatal("DropBatches accepted an unknown rank")
	}
	h.complete(tokenRange(0, 2*testBlock+1), "")
	h.complete(tokenRange(500, 2*testBlock+1), "")
	events := drainBatches(t, kv, routing.Worker{ID: 42}, h.srv.Incarnation(), h.lastEventID())
	if len(events) == 0 || events[0].ID == 1 {
		t.Fatalf("events %+v: the first batch should have been dropped", events)
	}
	// The heartbeat still reports the engine's last id, so a consumer that
	// missed the tail notices too.
	hb := subscribe(t, h.obs, kvrpb.SubjectHeartbeat(testDC, 42))
	beat, err := wire.DecodeHeartbeat(next(t, hb).Data)
	if err != nil || beat.Loads[0].LastEventId != events[len(events)-1].ID {
		t.Fatalf("heartbeat %+v err %v, last published %d", beat, err, events[len(events)-1].ID)
	}
}

func TestCardHeartbeatDeregister(t *testing.T) {
	var reg, hb, dereg *nats.Subscription
	h := startHarness(t, func(c *Config) { c.DPSize = 2 }, func(nc *nats.Conn) {
		reg = subscribe(t, nc, kvrpb.SubjectRegister(testDC, 42))
		hb = subscribe(t, nc, kvrpb.SubjectHeartbeat(testDC, 42))
		dereg = subscribe(t, nc, kvrpb.SubjectDeregister(testDC, 42))
	})
	card, err := wire.DecodeCard(next(t, reg).Data)
	if err != nil {
		t.Fatal(err)
	}
	if card.EngineId != 42 || card.DpSize != 2 || card.Model != testModel || card.BlockSize != testBlock ||
		card.TotalKvBlocks != 64 || card.EndpointUrl != h.base || card.Version != kvrpb.Version || card.Incarnation != h.srv.Incarnation() {
		t.Fatalf("card %+v, endpoint want %s", card, h.base)
	}
	again, err := wire.DecodeCard(next(t, reg).Data)
	if err != nil || !proto.Equal(card, again) {
		t.Fatalf("re-published card differs: %v", err)
	}
	h.complete(tokenRange(0, testBlock+1), "1")
	beat := waitBeat(t, hb, func(b *kvrpb.Heartbeat) bool { return b.Loads[1].LastEventId > 0 })
	if beat.CardChecksum != card.Checksum || beat.Incarnation != card.Incarnation {
		t.Fatalf("heartbeat %+v", beat)
	}
	for i, l := range beat.Loads {
		if l.Rank != uint32(i) || l.KvTotalBlocks != 64 {
			t.Fatalf("load %d: %+v", i, l)
		}
	}
	if beat.Loads[0].LastEventId != 0 {
		t.Fatalf("the pinned request ran on rank 1 only: loads %+v", beat.Loads)
	}

	h.srv.PauseHeartbeats(true)
	// Every beat published before the pause is in hb's queue once both
	// connections flushed: the server forwards a client's messages before
	// answering its flush, and the observer reads them before the answer
	// to its own. One more may come: the heartbeat loop publishes one
	// beat at a time, and the one whose pause check ran before the pause
	// is published after it.
	for _, nc := range []*nats.Conn{h.srv.nc, h.obs} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for {
		if _, err := hb.NextMsg(0); err != nil {
			break
		}
	}
	// The window is ten heartbeat intervals, in which a running engine
	// publishes ten beats; the resumed engine's beat below is the
	// positive control.
	waittest.Holds(t, 10*testConfig().HeartbeatInterval, "at most the one beat in flight at the pause", func() bool {
		n, _, _ := hb.Pending()
		return n <= 1
	})
	h.srv.PauseHeartbeats(false)
	next(t, hb)

	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	var d kvrpb.Deregister
	if err := proto.Unmarshal(next(t, dereg).Data, &d); err != nil || d.EngineId != 42 || d.Incarnation != card.Incarnation {
		t.Fatalf("deregister %+v err %v", &d, err)
	}
}

// waitBeat returns the first heartbeat that satisfies ok; every heartbeat
// must decode and carry both ranks.
func waitBeat(t *testing.T, sub *nats.Subscription, ok func(*kvrpb.Heartbeat) bool) *kvrpb.Heartbeat {
	t.Helper()
	for {
		b, err := wire.DecodeHeartbeat(next(t, sub).Data)
		if err != nil || len(b.Loads) != 2 {
			t.Fatalf("heartbeat %+v err %v", b, err)
		}
		if ok(b) {
			return b
		}
	}
}

func TestStopAbortsRequestsInFlight(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.Engine.SpeedUp = 1 }, nil)
	stream := h.client().Stream(context.Background(), "/v1/chat/completions", chat("long", 500, true))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Fatal("a stream cut by shutdown ended without an error")
	}
	if err := h.srv.Run(context.Background()); err != ErrStarted {
		t.Fatalf("second Run: %v", err)
	}
}

// TestRunWithHandler runs the engine without Serve: the caller serves
// Handler itself and must name the endpoint.
func TestRunWithHandler(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreAnyFunction(zmqPubWriter)) })
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	nc := connect(t, ns.ClientURL())
	if srv, _ := New(testConfig(), nc, nil); !errors.Is(srv.Run(context.Background()), ErrConfig) {
		t.Fatal("Run without an endpoint was accepted")
	}
	hs := httptest.NewUnstartedServer(nil)
	cfg := testConfig()
	cfg.EndpointURL = "http://" + hs.Listener.Addr().String()
	srv, err := New(cfg, nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = srv.Handler()
	hs.Start()
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	h := &harness{t: t, srv: srv, base: hs.URL}
	var resp *oaiedgetest.Completion
	waittest.UntilNil(t, 10*time.Second, "the engine answers (it opens asynchronously: 503 until then)", func() (err error) {
		resp, err = h.client().Create(context.Background(), "/v1/chat/completions", chat("run", 3, false))
		return err
	})
	if resp.Content() != expectedText(3) || srv.Card().GetEndpointUrl() != cfg.EndpointURL {
		t.Fatalf("resp %+v card %v", resp, srv.Card())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
