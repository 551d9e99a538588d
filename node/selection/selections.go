package selection

import (
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/node/dispatch"
)

// selections keeps recent selections for Reserve: the request, with a
// prompt of its own, and the engine chosen. Entries leave in the
// order they came, at their TTL or when the entry or byte bound needs
// room; since every entry has the same TTL, insertion order is expiry
// order and a FIFO is all the bookkeeping needed.
type selections struct {
	ttl      time.Duration
	maxN     int
	maxBytes int64

	mu    sync.Mutex
	m     map[string]*selected
	order []string // ids, oldest first; ids already taken are skipped
	bytes int64
}

// selected is one kept selection.
type selected struct {
	req dispatch.Request
	pins
	expires time.Time
	bytes   int64
}

// pins are a selection's engines: the engine (a pair's decode engine) and
// a pair's prefill engine (nil for aggregated serving).
type pins struct {
	worker  dispatch.Pin
	prefill *dispatch.Pin
}

func newSelections(ttl time.Duration, maxN int, maxBytes int64) *selections {
	return &selections{ttl: ttl, maxN: maxN, maxBytes: maxBytes, m: make(map[string]*selected)}
}

// put keeps a copy of r as chosen to go to p's engines, and returns its
// id. Its tokens are copied only when lent (see lease): a prompt of token
// ids owns them, and copying 48 KiB per Select bought nothing.
func (ss *selections) put(r *dispatch.Request, p pins, lent bool, now time.Time) string {
	e := &selected{req: *r, pins: p, expires: now.Add(ss.ttl)}
	if lent {
		e.req.Tokens = append([]uint32(nil), r.Tokens...)
	}
	e.req.Pin, e.req.PrefillPin = nil, nil
	if c := r.OverlapScoreCredit; c != nil {
		e.req.OverlapScoreCredit = new(*c)
	}
	e.bytes = int64(4*len(e.req.Tokens) + len(e.req.Text) + 256)
	id := newID()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.m[id] = e
	ss.order = append(ss.order, id)
	ss.bytes += e.bytes
	ss.evict(now)
	return id
}

// take removes and returns selection id, if it is still kept.
func (ss *selections) take(id string, now time.Time) (*selected, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.evict(now)
	e, ok := ss.m[id]
	if ok {
		delete(ss.m, id)
		ss.bytes -= e.bytes
	}
	return e, ok
}

// evict drops expired entries and, oldest first, those over the bounds;
// ss.mu is held.
func (ss *selections) evict(now time.Time) {
	n := 0
	for ; n < len(ss.order); n++ {
		e, ok := ss.m[ss.order[n]]
		if !ok {
			continue // taken
		}
		if now.Before(e.expires) && len(ss.m) <= ss.maxN && ss.bytes <= ss.maxBytes {
			break
		}
		delete(ss.m, ss.order[n])
		ss.bytes -= e.bytes
	}
	ss.order = ss.order[n:]
	if cap(ss.order) > 4*ss.maxN && len(ss.order) < ss.maxN {
		ss.order = append([]string(nil), ss.order...) // let the old array go
	}
}
