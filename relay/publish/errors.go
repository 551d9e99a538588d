package publish

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/relay/producer"
)

// Sentinel errors of the protocol. A stream ends with exactly one of them;
// Action says what the subscriber does next. The feed-ending errors are the
// producer's own values, so errors.Is matches on both sides of the wire.
var (
	// ErrUnknownPool: no producer publishes the requested pool here.
	ErrUnknownPool = errors.New("publish: unknown pool")
	// ErrProducerChanged: the producer's epoch changed (rebuild, restart).
	ErrProducerChanged = producer.ErrProducerChanged
	// ErrResync: a publication was too large for a delta.
	ErrResync = producer.ErrResync
	// ErrLagged: the subscriber's queue overflowed.
	ErrLagged = producer.ErrLagged
	// ErrContract: the peer speaks another contract or protocol version,
	// or publishes a filter format this build cannot read.
	ErrContract = errors.New("publish: contract mismatch")
	// ErrInvalidRequest: the subscribe request is malformed.
	ErrInvalidRequest = errors.New("publish: invalid request")
	// ErrUnavailable: the server or producer is shutting down, or the
	// transport failed.
	ErrUnavailable = errors.New("publish: unavailable")
	// ErrGap: the stream skipped a sequence number or a heartbeat is ahead
	// of the applied seq; detected by the subscriber.
	ErrGap = errors.New("publish: sequence gap")
	// ErrProtocol: the stream broke the message order or carried a corrupt
	// payload; detected by the subscriber.
	ErrProtocol = errors.New("publish: protocol violation")
)

// Action is what a subscriber does after a stream ends with an error.
type Action uint8

// The actions, from most to least eager.
const (
	// ResubscribeNow: subscribe again at once; a snapshot follows.
	ResubscribeNow Action = iota + 1
	// ResubscribeBackoff: subscribe again after the lane's backoff.
	ResubscribeBackoff
	// ResubscribeSlow: subscribe again only at the maximum backoff; the
	// condition needs a deployment change (pool missing, contract).
	ResubscribeSlow
)

// ReasonKey is the trailer key carrying the reason name of an error.
const ReasonKey = "kvr-relay-reason"

// errorRow is one line of the error table: sentinel, wire code, reason
// name, client action.
type errorRow struct {
	err    error
	code   codes.Code
	reason string
	action Action
}

// errorTable is the one place where protocol errors meet gRPC status codes.
var errorTable = []errorRow{
	{ErrUnknownPool, codes.NotFound, "UNKNOWN_POOL", ResubscribeSlow},
	{ErrProducerChanged, codes.Aborted, "PRODUCER_CHANGED", ResubscribeNow},
	{ErrResync, codes.Aborted, "RESYNC", ResubscribeNow},
	{ErrLagged, codes.ResourceExhausted, "LAGGED", ResubscribeBackoff},
	{ErrContract, codes.FailedPrecondition, "CONTRACT_MISMATCH", ResubscribeSlow},
	{ErrInvalidRequest, codes.InvalidArgument, "INVALID_REQUEST", ResubscribeSlow},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE", ResubscribeBackoff},
	{ErrGap, codes.DataLoss, "GAP", ResubscribeNow},
	{ErrProtocol, codes.DataLoss, "PROTOCOL", ResubscribeBackoff},
}

// toStatus converts a server-side error into the stream's final status and
// sets the reason trailer.
func toStatus(ctx context.Context, err error) error {
	if errors.Is(err, producer.ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for _, r := range errorTable {
		if errors.Is(err, r.err) {
			_ = setTrailer(ctx, r.reason)
			return status.Error(r.code, err.Error())
		}
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// setTrailer attaches the reason to the stream's trailer.
func setTrailer(ctx context.Context, reason string) error {
	return grpc.SetTrailer(ctx, metadata.Pairs(ReasonKey, reason))
}

// fromStatus converts a client-side stream error into a sentinel, using the
// reason trailer when present and the status code otherwise.
func fromStatus(err error, trailer metadata.MD) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if rs := trailer.Get(ReasonKey); len(rs) == 1 {
		for _, r := range errorTable {
			if r.reason == rs[0] {
				return fmt.Errorf("%w: %s", r.err, st.Message())
			}
		}
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded:
		return err
	case codes.NotFound:
		return fmt.Errorf("%w: %s", ErrUnknownPool, st.Message())
	case codes.FailedPrecondition, codes.Unimplemented:
		return fmt.Errorf("%w: %s", ErrContract, st.Message())
	}
	return fmt.Errorf("%w: %s: %s", ErrUnavailable, st.Code(), st.Message())
}

// ActionFor returns the client action for an error that ended a stream.
// Unknown errors get ResubscribeBackoff: never give up, never hammer.
func ActionFor(err error) Action {
	for _, r := range errorTable {
		if errors.Is(err, r.err) {
			return r.action
		}
	}
	return ResubscribeBackoff
}
