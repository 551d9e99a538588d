package vllmevents

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"
)

// endSeq is the sequence number of the replay's end marker: -1 as 8 bytes
// big-endian two's complement.
const endSeq = ^uint64(0)

// zmqReplayer returns a replayer that dials endpoint with a fresh DEALER
// socket per replay. Replays are rare (a gap, a reconnect), so a socket
// kept open would only be one more thing to watch.
func zmqReplayer(endpoint string, timeout time.Duration, maxPayload int) replayer {
	return func(ctx context.Context, from uint64, fn func(uint64, []byte)) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		d := zmq4.NewDealer(ctx, zmq4.WithDialerRetry(100*time.Millisecond), zmq4.WithDialerMaxRetries(-1),
			zmq4.WithLogger(discardLogger))
		defer d.Close()
		if err := d.Dial(endpoint); err != nil {
			return fmt.Errorf("%w: dial %s: %w", ErrReplay, endpoint, err)
		}
		return readReplay(d, from, maxPayload, fn)
	}
}

// readReplay sends the request ["", from] and reads ["", seq, payload]
// replies until the end marker. A reply that is not of that shape ends
// the replay with an error: the frames after it cannot be trusted.
func readReplay(d zmq4.Socket, from uint64, maxPayload int, fn func(uint64, []byte)) error {
	req := binary.BigEndian.AppendUint64(nil, from)
	if err := d.SendMulti(zmq4.NewMsgFrom([]byte{}, req)); err != nil {
		return fmt.Errorf("%w: send request: %w", ErrReplay, err)
	}
	for {
		msg, err := d.Recv()
		if err != nil {
			return fmt.Errorf("%w: receive: %w", ErrReplay, err)
		}
		f := msg.Frames
		if len(f) != 3 || len(f[0]) != 0 || len(f[1]) != 8 {
			return fmt.Errorf("%w: reply of %d frames", ErrReplay, len(f))
		}
		seq := binary.BigEndian.Uint64(f[1])
		if seq == endSeq {
			return nil
		}
		if len(f[2]) > maxPayload {
			return fmt.Errorf("%w: batch %d of %d bytes", ErrReplay, seq, len(f[2]))
		}
		fn(seq, f[2])
	}
}
