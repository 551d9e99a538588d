package mocker

import (
	"errors"
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// ErrEventsGone is returned by EventsSince when the requested events have
// left the ring; the consumer must resynchronise from Dump.
var ErrEventsGone = errors.New("mocker: events no longer buffered")

// eventLog numbers an engine's KV events, keeps the most recent ones in a
// ring for gap repair and collects those not yet handed to the driver.
type eventLog struct {
	worker  routing.Worker
	lastID  uint64
	ring    []routing.Event
	next    int // ring slot of the next event
	pending []routing.Event
}

func newEventLog(w routing.Worker, size int) *eventLog {
	return &eventLog{worker: w, ring: make([]routing.Event, 0, size)}
}

// emit stamps ev with the worker, the device tier and the next id, and
// records it.
func (l *eventLog) emit(ev routing.Event) {
	l.lastID++
	ev.ID = l.lastID
	ev.Worker = l.worker
	ev.Tier = routing.TierDevice
	if len(l.ring) < cap(l.ring) {
		l.ring = append(l.ring, ev)
	} else {
		l.ring[l.next] = ev
	}
	l.next = (l.next + 1) % cap(l.ring)
	l.pending = append(l.pending, ev)
}

// drain returns the events emitted since the previous drain.
func (l *eventLog) drain() []routing.Event {
	out := l.pending
	l.pending = nil
	return out
}

// oldest returns the id of the oldest buffered event (lastID+1 when empty).
func (l *eventLog) oldest() uint64 {
	return l.lastID - uint64(len(l.ring)) + 1
}

// since returns the buffered events with ids above after, in order.
func (l *eventLog) since(after uint64) ([]routing.Event, error) {
	if after >= l.lastID {
		return nil, nil
	}
	if after+1 < l.oldest() {
		return nil, fmt.Errorf("%w: want ids from %d, oldest buffered is %d", ErrEventsGone, after+1, l.oldest())
	}
	n := int(l.lastID - after)
	out := make([]routing.Event, 0, n)
	start := (l.next - n + len(l.ring)) % len(l.ring)
	for i := range n {
		out = append(out, l.ring[(start+i)%len(l.ring)])
	}
	return out, nil
}
