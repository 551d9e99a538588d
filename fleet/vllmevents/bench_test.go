package vllmevents

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// Shape of a benchmark batch: one engine step that stores benchEvents
// sequences of benchBlocks blocks of 16 tokens and evicts as many blocks,
// like a busy vLLM step (8 prefills of 256 tokens).
const (
	benchEvents = 8
	benchBlocks = 16
	benchBS     = 16
	benchRing   = 64
)

// blockEventsPerBatch counts the stored and removed blocks of one batch.
const blockEventsPerBatch = 2 * benchEvents * benchBlocks

// benchBatches builds a ring of batches: batch j stores fresh blocks and
// removes those batch j-1 stored, so the index stays the same size however
// long the ring is replayed. Token ids are random below 150000, the
// vocabulary of current models, so they take 3- and 5-byte encodings.
func benchBatches(b *testing.B) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	hash := func(j, e, k int) uint64 { return uint64(j)<<32 | uint64(e)<<16 | uint64(k) | 1<<63 }
	out := make([][]byte, benchRing)
	for j := range out {
		var events []any
		for e := range benchEvents {
			hs := make([]any, benchBlocks)
			for k := range hs {
				hs[k] = hash(j, e, k)
			}
			toks := make([]any, benchBlocks*benchBS)
			for i := range toks {
				toks[i] = r.Uint32N(150000)
			}
			events = append(events, []any{"BlockStored", hs, nil, toks, benchBS, nil, "GPU", nil})
		}
		prev := (j + benchRing - 1) % benchRing
		removed := make([]any, 0, benchEvents*benchBlocks)
		for e := range benchEvents {
			for k := range benchBlocks {
				removed = append(removed, hash(prev, e, k))
			}
		}
		events = append(events, []any{"BlockRemoved", removed, "GPU"})
		out[j] = mustPack(b, []any{1.5, events, 0})
	}
	return out
}

// cpuMeter measures the process's CPU time over a benchmark loop.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	c, ok := processCPU()
	return cpuMeter{start: c, ok: ok}
}

// report gives block events per wall-clock second and per CPU-second of
// the whole process (the figure "on one core" means).
func (m cpuMeter) report(b *testing.B, batches int) {
	events := float64(batches * blockEventsPerBatch)
	b.ReportMetric(events/b.Elapsed().Seconds(), "blockevents/s")
	if end, ok := processCPU(); ok && m.ok && end > m.start {
		b.ReportMetric(events/(end-m.start).Seconds(), "blockevents/cpu-s")
	}
}

// BenchmarkDecode is decoding alone: msgpack to Batch.
func BenchmarkDecode(b *testing.B) {
	batches := benchBatches(b)
	dec := NewDecoder()
	var batch Batch
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := range b.N {
		if err := dec.Decode(batches[i%benchRing], &batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu.report(b, b.N)
}

// BenchmarkIngest is the whole path after the socket: decode, hash the
// tokens, convert and apply to an exact index.
func BenchmarkIngest(b *testing.B) {
	batches := benchBatches(b)
	s, err := New(Config{Worker: routing.Worker{ID: 1}, Endpoint: "tcp://127.0.0.1:1", BlockSize: benchBS}, index.NewExact(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	s.reset(ResyncStart)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := range b.N {
		s.handle(ctx, uint64(i), batches[i%benchRing])
	}
	b.StopTimer()
	if st := s.Stats(); st.Batches != uint64(b.N) || st.Rejected != 0 {
		b.Fatalf("stats %+v", st)
	}
	cpu.report(b, b.N)
}

// BenchmarkIngestZMQ adds the socket: an in-process zmq4 PUB on loopback
// TCP sends the batches to a running Subscriber, which applies them to an
// exact index. The publisher's cost is in the figure too.
func BenchmarkIngestZMQ(b *testing.B) {
	batches := benchBatches(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := zmq4.NewPub(ctx, zmq4.WithLogger(discardLogger))
	defer pub.Close()
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Worker: routing.Worker{ID: 1}, Endpoint: "tcp://" + pub.Addr().String(), BlockSize: benchBS},
		index.NewExact(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	seq := uint64(0)
	send := func() {
		msg := zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, seq), batches[seq%benchRing])
		if err := pub.SendMulti(msg); err != nil {
			b.Fatal(err)
		}
		seq++
	}
	// Publish until the subscription has arrived (a SUB joins late).
	for s.Stats().Batches == 0 {
		send()
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	base := s.Stats().Batches
	b.ResetTimer()
	cpu := startCPU()
	for range b.N {
		send()
	}
	for s.Stats().Batches < base+uint64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	cpu.report(b, b.N)
}
