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
}

// Read reads r's body. A body of declared length is read into alloc(n)
// (a fresh slice when alloc is nil) instead of the doublings of
// io.ReadAll; one of unknown length is read by io.ReadAll.
//
// The read deadline is the slowloris defence for bodies: once the headers
// are in, the client has Timeout to deliver the body, however it paces
// the bytes. The deadline is cleared afterwards, because net/http keeps
// reading the connection in the background during the response to notice
// a client that goes away, and that read must not time out. A failed
// read closes the connection: the rest of the body is not worth reading,
// and net/http would otherwise drain it after the response, which a
// trickling client would stretch out indefinitely.
func (br BodyReader) Read(w http.ResponseWriter, r *http.Request, alloc func(n int) []byte) ([]byte, error) {
	if r.ContentLength > br.MaxBytes {
		w.Header().Set("Connection", "close")
		return nil, ErrBodyTooLarge
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
		body, err = io.ReadAll(rd)
	}
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, bodyError(err)
	}
	return body, nil
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
