package selection

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// reservations holds the Decisions of reserved requests until they are
// released or expire.
type reservations struct {
	ttl time.Duration
	max int
	m   *metrics.Selection // nil: no metrics

	mu     sync.Mutex
	byID   map[string]*reservation
	closed bool
}

// reservation is one booked request. mu serializes its Decision's
// callbacks, which must not run at once.
type reservation struct {
	mu    sync.Mutex
	dec   *dispatch.Decision
	timer *time.Timer
}

// add keeps dec under a new random id until it is released or its TTL
// passes. On a refusal (the limit, or closed) dec is ended with the error.
func (rs *reservations) add(dec *dispatch.Decision) (string, error) {
	id := newID()
	rs.mu.Lock()
	var err error
	switch {
	case rs.closed:
		err = ErrClosed
	case len(rs.byID) >= rs.max:
		err = fmt.Errorf("%w: %d", ErrReservationLimit, rs.max)
	default:
		r := &reservation{dec: dec}
		rs.byID[id] = r
		r.timer = time.AfterFunc(rs.ttl, func() { rs.expire(id) })
		rs.count(1)
	}
	rs.mu.Unlock()
	if err != nil {
		dec.Done(err)
		return "", err
	}
	return id, nil
}

// prefillComplete ends the prefill load of reservation id.
func (rs *reservations) prefillComplete(id string) error {
	rs.mu.Lock()
	r := rs.byID[id]
	rs.mu.Unlock()
	if r == nil {
		return fmt.Errorf("%w: %q", ErrReservationNotFound, id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Both are no-ops once Done has run. A pair's first token also means
	// its prefill hop handed the cache off: that hop's load ends.
	if r.dec.Prefill != nil {
		r.dec.Prefill.Done(nil)
	}
	r.dec.OnFirstToken()
	return nil
}

// release ends reservation id with err (nil: success) and reports
// whether it was outstanding.
func (rs *reservations) release(id string, err error) bool {
	r := rs.take(id)
	if r == nil {
		return false
	}
	r.timer.Stop()
	r.end(err)
	return true
}

// expire frees a reservation its caller never released.
func (rs *reservations) expire(id string) {
	r := rs.take(id)
	if r == nil {
		return
	}
	if rs.m != nil {
		rs.m.Expired.Inc()
	}
	r.end(errExpired)
}

// take removes reservation id, nil when it is not outstanding.
func (rs *reservations) take(id string) *reservation {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.byID[id]
	if r != nil {
		delete(rs.byID, id)
		rs.count(-1)
	}
	return r
}

// end ends the reservation's Decision; a pair released as its prefill
// engine's failure makes that engine a suspect of the prefill stage.
func (r *reservation) end(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dec.Prefill != nil && errors.Is(err, errPrefillUnreachable) {
		r.dec.Prefill.Done(fmt.Errorf("%w: %w", dispatch.ErrEngineUnreachable, err))
	}
	r.dec.Done(err)
}

// count moves the gauge; rs.mu is held.
func (rs *reservations) count(d float64) {
	if rs.m != nil {
		rs.m.Reservations.Add(d)
	}
}

// close refuses new reservations and frees the outstanding ones.
func (rs *reservations) close() {
	rs.mu.Lock()
	rs.closed = true
	all := rs.byID
	rs.byID = make(map[string]*reservation)
	rs.count(-float64(len(all)))
	rs.mu.Unlock()
	for _, r := range all {
		r.timer.Stop()
		r.end(ErrClosed)
	}
}

// len is the number of outstanding reservations.
func (rs *reservations) len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.byID)
}

// errExpired ends a reservation whose TTL passed: the request is taken
// as failed, so that its session is not bound by it.
var errExpired = fmt.Errorf("selection: reservation expired")

// newID is a random, unguessable id: a caller cannot end another's
// reservation by guessing.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
