package publish

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// store returns a batch storing hs on one rank.
func store(hs ...routing.SeqHash) producer.Batch {
	return producer.Batch{Changes: []producer.Change{{Kind: producer.Stored, Worker: routing.Worker{ID: 1}, Hashes: hs}}}
}

func TestSubscribeErrors(t *testing.T) {
	srv, _ := NewServer(ServerConfig{})
	srv.Register(newProducer(t, 1, 8))
	c := serve(t, srv, nil)
	other := testPool
	other.DC = "dc-z"
	tests := []struct {
		name   string
		req    *kvrpb.RelaySubscribeRequest
		want   error
		action Action
	}{
		{name: "unknown pool", req: &kvrpb.RelaySubscribeRequest{Contract: Contract, ProtocolVersion: 1, Pool: poolToProto(other), SubscriberId: "s"},
			want: ErrUnknownPool, action: ResubscribeSlow},
		{name: "contract", req: &kvrpb.RelaySubscribeRequest{Contract: 1, ProtocolVersion: 1, Pool: poolToProto(testPool), SubscriberId: "s"},
			want: ErrContract, action: ResubscribeSlow},
		{name: "version", req: &kvrpb.RelaySubscribeRequest{Contract: Contract, ProtocolVersion: 2, Pool: poolToProto(testPool), SubscriberId: "s"},
			want: ErrContract, action: ResubscribeSlow},
		{name: "no subscriber id", req: &kvrpb.RelaySubscribeRequest{Contract: Contract, ProtocolVersion: 1, Pool: poolToProto(testPool)},
			want: ErrInvalidRequest, action: ResubscribeSlow},
		{name: "no pool", req: &kvrpb.RelaySubscribeRequest{Contract: Contract, ProtocolVersion: 1, SubscriberId: "s"},
			want: ErrInvalidRequest, action: ResubscribeSlow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.Subscribe(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Recv()
			got := fromStatus(err, s.Trailer())
			if !errors.Is(got, tt.want) || ActionFor(got) != tt.action {
				t.Fatalf("error %v (action %d), want %v (action %d)", got, ActionFor(got), tt.want, tt.action)
			}
		})
	}
}

func TestStreamSnapshotDeltasHeartbeat(t *testing.T) {
	p := newProducer(t, 1, 64)
	for i := range 300 {
		_ = p.Apply(store(routing.SeqHash(uint64(i+1) * 0x9E3779B97F4A7C15)))
	}
	srv, _ := NewServer(ServerConfig{ChunkBytes: MinChunkBytes})
	srv.Register(p)
	s, err := Subscribe(context.Background(), serve(t, srv, nil), Request{Pool: testPool, SubscriberID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev, err := s.Recv()
	if err != nil || ev.Kind != EventSnapshot || ev.Seq != 300 {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	f := ev.Filter
	_ = p.Apply(store(1, 2, 3))
	p.SetLoad(producer.Load{Engines: 4, ActiveRequests: 9})
	p.Beat(time.Unix(1, 0))
	for _, want := range []EventKind{EventDelta, EventHeartbeat} {
		ev, err := s.Recv()
		if err != nil || ev.Kind != want {
			t.Fatalf("event %+v, %v; want kind %d", ev, err, want)
		}
		if ev.Kind == EventDelta {
			if err := f.Apply(ev.Delta); err != nil {
				t.Fatal(err)
			}
		} else if ev.Load.Engines != 4 || ev.Load.ActiveRequests != 9 || ev.Seq != 301 {
			t.Fatalf("heartbeat %+v", ev)
		}
	}
	assertSame(t, f, p)
}

func TestRegisterReplacementEndsStreamWithProducerChanged(t *testing.T) {
	srv, _ := NewServer(ServerConfig{})
	srv.Register(newProducer(t, 1, 8))
	s, err := Subscribe(context.Background(), serve(t, srv, nil), Request{Pool: testPool, SubscriberID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	srv.Register(newProducer(t, 2, 8))
	_, err = s.Recv()
	if !errors.Is(err, ErrProducerChanged) || ActionFor(err) != ResubscribeNow {
		t.Fatalf("error %v", err)
	}
}

// assertSame fails unless f encodes like p.
func assertSame(t testing.TB, f filter.Summary, p *producer.Producer) {
	t.Helper()
	got, _ := f.MarshalBinary()
	want, _ := p.MarshalBinary()
	if !bytes.Equal(got, want) {
		t.Fatal("filter differs from the producer's")
	}
}
