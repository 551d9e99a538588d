package publish

import (
	"encoding/binary"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
)

// fixture returns a small filter encoding and a delta encoding on it.
func fixture(t testing.TB) (snap, delta []byte) {
	t.Helper()
	c, err := filter.NewCuckoo(filter.Config{Capacity: 64, Seed: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ = c.MarshalBinary()
	c.TrackChanges()
	_ = c.Insert(42)
	delta, _ = c.TakeChanges().MarshalBinary()
	return snap, delta
}

func chunkMsg(epoch, seq uint64, i, n uint32, total int, data []byte) *kvrpb.RelayMessage {
	m := message()
	m.Body = &kvrpb.RelayMessage_Snapshot{Snapshot: &kvrpb.RelaySnapshotChunk{Epoch: epoch, Seq: seq, Index: i, Count: n, TotalBytes: uint64(total), Data: data}}
	return m
}

func deltaMsg(epoch, seq uint64, data []byte) *kvrpb.RelayMessage {
	m := message()
	m.Body = &kvrpb.RelayMessage_Delta{Delta: &kvrpb.RelayDelta{Epoch: epoch, Seq: seq, Data: data}}
	return m
}

func beatMsg(epoch, seq uint64) *kvrpb.RelayMessage {
	m := message()
	m.Body = &kvrpb.RelayMessage_Heartbeat{Heartbeat: &kvrpb.RelayHeartbeat{Epoch: epoch, Seq: seq}}
	return m
}

func TestReader(t *testing.T) {
	snap, delta := fixture(t)
	half := len(snap) / 2
	whole := func() []*kvrpb.RelayMessage {
		return []*kvrpb.RelayMessage{chunkMsg(7, 3, 0, 2, len(snap), snap[:half]), chunkMsg(7, 3, 1, 2, len(snap), snap[half:])}
	}
	wrongContract := beatMsg(7, 3)
	wrongContract.Contract = 0
	tests := []struct {
		name   string
		msgs   []*kvrpb.RelayMessage
		events int
		want   error
	}{
		{name: "snapshot delta heartbeat", msgs: append(whole(), deltaMsg(7, 4, delta), beatMsg(7, 4)), events: 3},
		{name: "gap", msgs: append(whole(), deltaMsg(7, 5, delta)), events: 1, want: ErrGap},
		{name: "heartbeat ahead", msgs: append(whole(), beatMsg(7, 4)), events: 1, want: ErrGap},
		{name: "epoch change", msgs: append(whole(), deltaMsg(8, 4, delta)), events: 1, want: ErrProducerChanged},
		{name: "delta before snapshot", msgs: []*kvrpb.RelayMessage{deltaMsg(7, 1, delta)}, want: ErrProtocol},
		{name: "chunk out of order", msgs: []*kvrpb.RelayMessage{chunkMsg(7, 3, 1, 2, len(snap), snap[half:])}, want: ErrProtocol},
		{name: "chunk count changes", msgs: []*kvrpb.RelayMessage{chunkMsg(7, 3, 0, 2, len(snap), snap[:half]), chunkMsg(7, 3, 1, 3, len(snap), snap[half:])}, want: ErrProtocol},
		{name: "oversized snapshot", msgs: []*kvrpb.RelayMessage{chunkMsg(7, 3, 0, 1, 1<<40, snap)}, want: ErrProtocol},
		{name: "chunk after snapshot", msgs: append(whole(), chunkMsg(7, 3, 0, 1, len(snap), snap)), events: 1, want: ErrProtocol},
		{name: "corrupt delta", msgs: append(whole(), deltaMsg(7, 4, delta[:10])), events: 1, want: ErrProtocol},
		{name: "contract", msgs: []*kvrpb.RelayMessage{wrongContract}, want: ErrContract},
		{name: "empty body", msgs: []*kvrpb.RelayMessage{message()}, want: ErrContract},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reader{maxSnapshot: DefaultMaxSnapshotBytes}
			events := 0
			var err error
			for _, m := range tt.msgs {
				var ok bool
				if _, ok, err = r.handle(m); err != nil {
					break
				}
				if ok {
					events++
				}
			}
			if events != tt.events || !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("%d events, error %v; want %d events, %v", events, err, tt.events, tt.want)
			}
		})
	}
}

// FuzzReader feeds arbitrary message sequences (length-prefixed protobuf
// encodings) to the subscriber's state machine: it must never panic, and
// whatever it accepts as a snapshot must re-encode.
func FuzzReader(f *testing.F) {
	snap, delta := fixture(f)
	f.Add(frames(chunkMsg(7, 3, 0, 1, len(snap), snap), deltaMsg(7, 4, delta), beatMsg(7, 4)))
	f.Add(frames(deltaMsg(7, 4, delta)))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := reader{maxSnapshot: 1 << 20}
		for len(data) >= 2 {
			n := int(binary.LittleEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				return
			}
			var m kvrpb.RelayMessage
			if proto.Unmarshal(data[:n], &m) != nil {
				return
			}
			data = data[n:]
			ev, ok, err := r.handle(&m)
			if err != nil {
				return
			}
			if ok && ev.Kind == EventSnapshot {
				if _, err := ev.Filter.MarshalBinary(); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// FuzzSubscribeRequest checks that the server's request validation never
// panics on arbitrary bytes.
func FuzzSubscribeRequest(f *testing.F) {
	b, _ := proto.Marshal(&kvrpb.RelaySubscribeRequest{Contract: Contract, ProtocolVersion: 1, Pool: poolToProto(testPool), SubscriberId: "s"})
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req kvrpb.RelaySubscribeRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		if pool, err := checkRequest(&req); err == nil && pool.Validate() != nil {
			t.Fatal("accepted an invalid pool")
		}
	})
}

// frames length-prefixes message encodings for FuzzReader.
func frames(ms ...*kvrpb.RelayMessage) []byte {
	var out []byte
	for _, m := range ms {
		b, _ := proto.Marshal(m)
		out = binary.LittleEndian.AppendUint16(out, uint16(len(b)))
		out = append(out, b...)
	}
	return out
}
