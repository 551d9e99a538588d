package publish

import (
	"fmt"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// DefaultMaxSnapshotBytes bounds the snapshot a subscriber accepts:
// 256 MiB holds a filter of 2^25 buckets (about 120 million blocks at 90%
// load), far above any pool, and stops a peer from making us buffer
// without limit.
const DefaultMaxSnapshotBytes = 256 << 20

// EventKind says what an Event carries.
type EventKind uint8

// The event kinds.
const (
	// EventSnapshot: Filter is a complete summary (a cuckoo or Bloom
	// filter) at (Epoch, Seq); it replaces whatever the subscriber had.
	EventSnapshot EventKind = iota + 1
	// EventDelta: Delta extends the filter from Seq-1 to Seq.
	EventDelta
	// EventHeartbeat: Load and Entries describe the pool at Seq.
	EventHeartbeat
)

// Event is one validated step of the stream.
type Event struct {
	Kind       EventKind
	Epoch, Seq uint64
	Filter     filter.Summary
	Delta      filter.Delta
	Load       producer.Load
	Entries    uint64
	// Bytes is the size of the payload that carried the event (the whole
	// snapshot, or the delta encoding).
	Bytes int
}

// reader is the subscriber's protocol state machine: it reassembles the
// snapshot, then accepts only contiguous deltas and heartbeats of the
// snapshot's epoch. It is separate from the transport so that it can be
// fuzzed with arbitrary messages.
type reader struct {
	maxSnapshot uint64
	synced      bool
	epoch, seq  uint64
	buf         []byte
	chunks      uint32
	count       uint32
	total       uint64
}

// handle validates m. It returns an event when m completes one (ok), and
// an error wrapping ErrContract, ErrProtocol, ErrGap or
// ErrProducerChanged when the stream must be abandoned.
func (r *reader) handle(m *kvrpb.RelayMessage) (ev Event, ok bool, err error) {
	if err := checkContract(m.GetContract(), m.GetProtocolVersion()); err != nil {
		return Event{}, false, err
	}
	switch b := m.GetBody().(type) {
	case *kvrpb.RelayMessage_Snapshot:
		return r.chunk(b.Snapshot)
	case *kvrpb.RelayMessage_Delta:
		ev, err := r.delta(b.Delta)
		return ev, err == nil, err
	case *kvrpb.RelayMessage_Heartbeat:
		ev, err := r.heartbeat(b.Heartbeat)
		return ev, err == nil, err
	}
	return Event{}, false, fmt.Errorf("%w: message without a known body", ErrContract)
}

// chunk accepts the next snapshot chunk and decodes the filter after the
// last one.
func (r *reader) chunk(c *kvrpb.RelaySnapshotChunk) (Event, bool, error) {
	if r.synced {
		return Event{}, false, fmt.Errorf("%w: snapshot chunk after the snapshot", ErrProtocol)
	}
	if c.GetIndex() == 0 && r.chunks == 0 {
		if err := r.begin(c); err != nil {
			return Event{}, false, err
		}
	}
	if c.GetIndex() != r.chunks || c.GetEpoch() != r.epoch || c.GetSeq() != r.seq || c.GetCount() != r.count ||
		c.GetTotalBytes() != r.total || uint64(len(r.buf))+uint64(len(c.GetData())) > r.total {
		return Event{}, false, fmt.Errorf("%w: chunk %d/%d of epoch %#x seq %d out of order or inconsistent",
			ErrProtocol, c.GetIndex(), c.GetCount(), c.GetEpoch(), c.GetSeq())
	}
	r.buf = append(r.buf, c.GetData()...)
	r.chunks++
	if r.chunks < r.count {
		return Event{}, false, nil
	}
	return r.finishSnapshot()
}

// begin starts reassembly from chunk 0, bounding the declared size.
func (r *reader) begin(c *kvrpb.RelaySnapshotChunk) error {
	if c.GetTotalBytes() > r.maxSnapshot {
		return fmt.Errorf("%w: snapshot of %d bytes exceeds the %d-byte limit", ErrProtocol, c.GetTotalBytes(), r.maxSnapshot)
	}
	if c.GetEpoch() == 0 || c.GetCount() == 0 {
		return fmt.Errorf("%w: epoch %#x, %d chunks", ErrProtocol, c.GetEpoch(), c.GetCount())
	}
	r.epoch, r.seq, r.total, r.count = c.GetEpoch(), c.GetSeq(), c.GetTotalBytes(), c.GetCount()
	// The buffer grows with the data received, never with a declared
	// size, so a lying header costs nothing.
	r.buf = r.buf[:0]
	return nil
}

// finishSnapshot decodes the reassembled filter.
func (r *reader) finishSnapshot() (Event, bool, error) {
	if uint64(len(r.buf)) != r.total {
		return Event{}, false, fmt.Errorf("%w: snapshot of %d bytes, declared %d", ErrProtocol, len(r.buf), r.total)
	}
	f, err := filter.Decode(r.buf)
	if err != nil {
		return Event{}, false, wrapFilterErr(err)
	}
	r.synced = true
	ev := Event{Kind: EventSnapshot, Epoch: r.epoch, Seq: r.seq, Filter: f, Bytes: len(r.buf)}
	r.buf = nil
	return ev, true, nil
}

// delta accepts the next delta.
func (r *reader) delta(d *kvrpb.RelayDelta) (Event, error) {
	if err := r.position(d.GetEpoch(), d.GetSeq(), r.seq+1); err != nil {
		return Event{}, err
	}
	fd, err := filter.DecodeDelta(d.GetData())
	if err != nil {
		return Event{}, wrapFilterErr(err)
	}
	r.seq++
	return Event{Kind: EventDelta, Epoch: r.epoch, Seq: r.seq, Delta: fd, Bytes: len(d.GetData())}, nil
}

// heartbeat accepts a heartbeat, which must name the applied seq.
func (r *reader) heartbeat(h *kvrpb.RelayHeartbeat) (Event, error) {
	if err := r.position(h.GetEpoch(), h.GetSeq(), r.seq); err != nil {
		return Event{}, err
	}
	return Event{Kind: EventHeartbeat, Epoch: r.epoch, Seq: r.seq, Load: loadFromProto(h.GetLoad()), Entries: h.GetEntries()}, nil
}

// position checks a post-snapshot message's epoch and seq.
func (r *reader) position(epoch, seq, want uint64) error {
	switch {
	case !r.synced:
		return fmt.Errorf("%w: update before the snapshot", ErrProtocol)
	case epoch != r.epoch:
		return fmt.Errorf("%w: epoch %#x on a stream of epoch %#x", ErrProducerChanged, epoch, r.epoch)
	case seq != want:
		return fmt.Errorf("%w: seq %d, want %d", ErrGap, seq, want)
	}
	return nil
}

// wrapFilterErr classifies a filter decoding error: a format this build
// cannot read is a contract mismatch, anything else a protocol violation.
func wrapFilterErr(err error) error {
	if isUnsupported(err) {
		return fmt.Errorf("%w: %w", ErrContract, err)
	}
	return fmt.Errorf("%w: %w", ErrProtocol, err)
}
