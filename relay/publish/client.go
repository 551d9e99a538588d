package publish

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// Request describes one subscription.
type Request struct {
	Pool producer.PoolID
	// SubscriberID names the subscriber in the server's logs (1..128 bytes).
	SubscriberID string
	// LastEpoch and LastSeq are what the subscriber last applied; sent for
	// diagnostics (version 1 always starts with a snapshot).
	LastEpoch, LastSeq uint64
	// MaxSnapshotBytes bounds the snapshot accepted; 0 means
	// DefaultMaxSnapshotBytes.
	MaxSnapshotBytes uint64
}

// Stream is the subscriber side of one subscription. Recv returns the
// snapshot first, then deltas and heartbeats, each validated against the
// previous: the caller applies what it gets, in order, and on any error
// drops the stream and subscribes again. A Stream is used by one goroutine.
type Stream struct {
	s      grpc.ServerStreamingClient[kvrpb.RelayMessage]
	cancel context.CancelFunc
	r      reader
}

// Subscribe opens a stream for req.Pool on c.
func Subscribe(ctx context.Context, c kvrpb.RelayClient, req Request) (*Stream, error) {
	if req.MaxSnapshotBytes == 0 {
		req.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	ctx, cancel := context.WithCancel(ctx)
	s, err := c.Subscribe(ctx, &kvrpb.RelaySubscribeRequest{
		Contract: Contract, ProtocolVersion: ProtocolVersion, Pool: poolToProto(req.Pool),
		SubscriberId: req.SubscriberID, LastEpoch: req.LastEpoch, LastSeq: req.LastSeq,
	})
	if err != nil {
		cancel()
		return nil, fromStatus(err, nil)
	}
	return &Stream{s: s, cancel: cancel, r: reader{maxSnapshot: req.MaxSnapshotBytes}}, nil
}

// Recv returns the next event. Errors wrap one of the package's sentinels
// (see ActionFor) or the context's error; the stream is closed after one.
func (s *Stream) Recv() (Event, error) {
	for {
		m, err := s.s.Recv()
		if err != nil {
			s.cancel()
			if errors.Is(err, io.EOF) {
				return Event{}, fmt.Errorf("%w: stream ended by the server", ErrUnavailable)
			}
			return Event{}, fromStatus(err, s.s.Trailer())
		}
		ev, ok, err := s.r.handle(m)
		if err != nil {
			s.cancel()
			return Event{}, err
		}
		if ok {
			return ev, nil
		}
	}
}

// Close ends the stream.
func (s *Stream) Close() { s.cancel() }

// isUnsupported reports a filter encoding this build cannot read.
func isUnsupported(err error) bool { return errors.Is(err, filter.ErrUnsupported) }
