package oaiedge

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// BodyReader reads request bodies whole, as both edges must: the router
// sees the whole prompt before it can hash it.
type BodyReader struct {
	// MaxBytes caps a body; a longer one is ErrBodyTooLarge.
	MaxBytes int64
	// Timeout bounds receiving a body once the headers are in; a slower
	// one is ErrBodyTimeout.
	Timeout time.Duration
	// Now is the clock of the deadline; nil means time.Now.
	Now func() time.Time
	// Budget, when set, bounds the body bytes the whole process holds
	// (budget.go); a body it cannot take is ErrBodyBudget.
	Budget *BodyBudget
}

// ReadHeld reads r's body. A body of declared length is read into
// alloc(n) (a fresh slice when alloc is nil) instead of the doublings of
// io.ReadAll; one of unknown length grows as it arrives. The returned
// hold is the body's share of Budget: the caller releases it when it lets
// go of the body's buffer. On error nothing is held.
//
// The budget is checked before a byte is read: a declared length must
// fit at once, and a body of unknown length must fit each time its buffer
// grows, so a refused body costs at most the buffer it had so far. A
// refusal carries Retry-After.
//
// The read deadline is the slowloris defence for bodies: once the headers
// are in, the client has Timeout to deliver the body, however it paces
// the bytes. The deadline is cleared afterwards, because net/http keeps
// reading the connection in the background during the response to notice
// a client that goes away, and that read must not time out. A failed
// read closes the connection: the rest of the body is not worth reading,
// and net/http would otherwise drain it after the response, which a
// trickling client would stretch out indefinitely.
func (br BodyReader) ReadHeld(w http.ResponseWriter, r *http.Request, alloc func(n int) []byte) ([]byte, BodyHold, error) {
	var hold BodyHold
	if r.ContentLength > br.MaxBytes {
		w.Header().Set("Connection", "close")
		return nil, hold, ErrBodyTooLarge
	}
	if n := r.ContentLength; n > 0 && !hold.grow(br.Budget, n) {
		return nil, hold, refuseBudget(w)
	}
	now := time.Now
	if br.Now != nil {
		now = br.Now
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(now().Add(br.Timeout))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	rd := http.MaxBytesReader(w, r.Body, br.MaxBytes)
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 {
		if alloc == nil {
			alloc = func(n int) []byte { return make([]byte, n) }
		}
		body = alloc(int(n))
		_, err = io.ReadFull(rd, body)
	} else {
		body, err = readGrowing(rd, br.MaxBytes, br.Budget, &hold)
	}
	if err != nil {
		hold.Release()
		if errors.Is(err, ErrBodyBudget) {
			return nil, hold, refuseBudget(w)
		}
		w.Header().Set("Connection", "close")
		return nil, hold, bodyError(err)
	}
	return body, hold, nil
}

// readGrowing reads a body of unknown length, doubling its buffer up to
// just over limit (the MaxBytesReader refuses the byte after limit) and
// taking each growth from budget into hold first.
func readGrowing(rd io.Reader, limit int64, budget *BodyBudget, hold *BodyHold) ([]byte, error) {
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			size := min(int64(max(2*cap(buf), 512)), limit+1)
			if size <= int64(cap(buf)) {
				size = int64(cap(buf)) + 512
			}
			if !hold.grow(budget, size-int64(cap(buf))) {
				return nil, ErrBodyBudget
			}
			next := make([]byte, len(buf), size)
			copy(next, buf)
			buf = next
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// refuseBudget readies the answer to ErrBodyBudget: the connection
// closed, since the unread body is not worth draining. Its Retry-After is
// its class's in budgetRows, which the edge's answer (Class.Answer) sets.
func refuseBudget(w http.ResponseWriter) error {
	w.Header().Set("Connection", "close")
	return ErrBodyBudget
}

// bodyError classifies a body read failure.
func bodyError(err error) error {
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge):
		return ErrBodyTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		return ErrBodyTimeout
	}
	return Invalid("", "reading the request body: %v", err)
}
