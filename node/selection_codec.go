package node

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// messageCodec is gRPC's protobuf codec for the selection edges, with its
// message buffers from messageBuffers instead of gRPC's default pool.
// That pool has no size between 32 KiB and 1 MiB and zeroes a buffer's
// whole capacity when it hands one out, so each Select of 12,288 token ids
// (36 KiB) cleared 1 MiB: a fifth of a round trip's CPU in the profile of
// BenchmarkSelectBesideProxied, for nothing. Here the clear is at most
// twice the message.
type messageCodec struct{}

var _ encoding.CodecV2 = messageCodec{}

// messageBuffers has a size at every power of two from 256 B to 1 MiB;
// larger messages (an OpenAI body near the body limit) get buffers of
// their own size.
var messageBuffers = mem.NewTieredBufferPool(1<<8, 1<<12, 1<<14, 1<<15, 1<<16, 1<<17, 1<<18, 1<<19, 1<<20)

// Name is the codec's content subtype, gRPC's default one.
func (messageCodec) Name() string { return "proto" }

// Marshal encodes v into one pooled buffer of its size.
func (messageCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("selection codec: %T is not a protobuf message", v)
	}
	size := proto.Size(m)
	buf := messageBuffers.Get(size)
	// UseCachedSize reuses the Size just computed.
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*buf)[:0], m)
	if err != nil {
		messageBuffers.Put(buf)
		return nil, err
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, messageBuffers)}, nil
}

// Unmarshal decodes data into v; the decoded message copies what it keeps
// (protobuf does not alias its input), so the buffer goes back at once.
func (messageCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("selection codec: %T is not a protobuf message", v)
	}
	buf := data.MaterializeToBuffer(messageBuffers)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}
