package node

import (
	"slices"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// TestSelectCodecRoundTripsMessages: the selection edges' codec decodes
// what it encodes, from one buffer or from the several a message arrives
// in, and refuses a value that is not a protobuf message.
func TestSelectCodecRoundTripsMessages(t *testing.T) {
	ids := make([]uint32, 12288)
	for i := range ids {
		ids[i] = uint32(i * 13)
	}
	in := &kvrpb.SelectRequest{Model: "m", Prompt: &kvrpb.SelectRequest_Tokens{Tokens: &kvrpb.SelectTokens{Ids: ids}}}
	c := messageCodec{}
	data, err := c.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	wire := data.Materialize()
	data.Free()
	for _, parts := range []int{1, 3} {
		var split mem.BufferSlice
		step := (len(wire) + parts - 1) / parts
		for at := 0; at < len(wire); at += step {
			split = append(split, mem.SliceBuffer(wire[at:min(at+step, len(wire))]))
		}
		var out kvrpb.SelectRequest
		if err := c.Unmarshal(split, &out); err != nil || !proto.Equal(&out, in) || !slices.Equal(out.GetTokens().GetIds(), ids) {
			t.Fatalf("%d parts: %v, equal %v", parts, err, proto.Equal(&out, in))
		}
	}
	if _, err := c.Marshal("not a message"); err == nil {
		t.Error("a string was marshalled")
	}
	if err := c.Unmarshal(nil, "not a message"); err == nil {
		t.Error("a string was unmarshalled into")
	}
}
