package frontend

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBodyReturnsAfterLastOwner checks the body's reference counting: the
// buffer stays readable while a reader is open after the exchange let go,
// a read after Close fails, and no new reader can be made once the last
// owner released it.
func TestBodyReturnsAfterLastOwner(t *testing.T) {
	b := getBody(10)
	copy(b.data, "0123456789")
	rd, err := b.reader()
	if err != nil {
		t.Fatal(err)
	}
	b.release() // the exchange finishes first
	if got, err := io.ReadAll(rd); err != nil || string(got) != "0123456789" {
		t.Fatalf("read %q, %v", got, err)
	}
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Read(make([]byte, 1)); !errors.Is(err, errBodyReleased) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := b.reader(); !errors.Is(err, errBodyReleased) {
		t.Fatalf("reader after release: %v", err)
	}
	_ = rd.Close() // a second close does nothing
	if n := b.refs.Load(); n != 0 {
		t.Fatalf("%d references left", n)
	}
}

// TestSizeClasses checks that a body of any size gets a buffer of at least
// that size, and that the pools only ever hold buffers of their class.
func TestSizeClasses(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 4096, 4097, 77_000, 1 << 21, 1<<21 + 1, 5 << 20} {
		b := getBody(n)
		if len(b.data) != n || cap(b.data) < n {
			t.Fatalf("n %d: len %d cap %d", n, len(b.data), cap(b.data))
		}
		b.release()
		if c := sizeClass(n); c <= maxBodyClass && cap(getBody(n).data) < 1<<c {
			t.Fatalf("n %d: recycled buffer below class %d", n, c)
		}
	}
}

// recordingConn is a net.Conn that records writes and can hold one.
type recordingConn struct {
	net.Conn
	writes  [][]byte
	started chan struct{}
	proceed chan struct{}
}

func (c *recordingConn) Write(p []byte) (int, error) {
	if c.started != nil {
		close(c.started)
		<-c.proceed
	}
	c.writes = append(c.writes, slices.Clone(p))
	return len(p), nil
}

// TestEngineConnWritesBodyOnce checks that a pooled body handed to an
// engine connection the way net/http does (behind an io.LimitedReader)
// goes out in one write of exactly the unread bytes.
func TestEngineConnWritesBodyOnce(t *testing.T) {
	b := getBody(100_000)
	for i := range b.data {
		b.data[i] = byte(i)
	}
	defer b.release()
	rd, _ := b.reader()
	head := make([]byte, 4000)
	if _, err := io.ReadFull(rd, head); err != nil {
		t.Fatal(err)
	}
	conn := &recordingConn{}
	lr := &io.LimitedReader{R: rd, N: 96_000}
	n, err := engineConn{conn}.ReadFrom(lr)
	if err != nil || n != 96_000 || lr.N != 0 || len(conn.writes) != 1 || !bytes.Equal(conn.writes[0], b.data[4000:]) {
		t.Fatalf("wrote %d (%v) in %d writes, %d left", n, err, len(conn.writes), lr.N)
	}
	if m, err := rd.Read(make([]byte, 1)); m != 0 || err != io.EOF {
		t.Fatalf("after the write: %d, %v", m, err)
	}
}

// TestBodyHeldDuringWrite checks that closing the reader and releasing
// the body while the connection is still writing it keeps the buffer out
// of the pool until the write returns.
func TestBodyHeldDuringWrite(t *testing.T) {
	b := getBody(50_000)
	rd, _ := b.reader()
	conn := &recordingConn{started: make(chan struct{}), proceed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = engineConn{conn}.ReadFrom(&io.LimitedReader{R: rd, N: 50_000})
	}()
	<-conn.started
	_ = rd.Close()
	b.release()
	if n := b.refs.Load(); n != 1 {
		t.Fatalf("%d references during the write, want the write's own", n)
	}
	close(conn.proceed)
	<-done
	if n := b.refs.Load(); n != 0 {
		t.Fatalf("%d references after the write", n)
	}
}

// TestLongBodiesForwardedUnchanged sends long pre-tokenized bodies, with
// and without a Content-Length and from several clients at once, and
// checks that the engine received each byte for byte: recycled buffers
// never leak one request's bytes into another.
func TestLongBodiesForwardedUnchanged(t *testing.T) {
	ts, _, e := setup(t, Config{}, nil)
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := range 8 {
				body := tokenBody(4000+1000*c+i, uint64(10*c+i))
				var rd io.Reader = bytes.NewReader(body)
				if i%2 == 1 {
					rd = io.MultiReader(rd) // no length: sent chunked
				}
				id := strings.Repeat("x", c+1) + string(rune('a'+i))
				req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/completions", rd)
				req.Header.Set("X-Request-Id", id)
				resp, err := ts.client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got := e.bodyOf(id); !bytes.Equal(got, body) {
					t.Errorf("request %s: engine got %d bytes, sent %d", id, len(got), len(body))
				}
			}
		})
	}
	wg.Wait()
}

// bodyOf returns the body the engine received with request id, waiting
// briefly for the engine's handler to record it.
func (e *fakeEngine) bodyOf(id string) []byte {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		e.mu.Lock()
		for i := len(e.ids) - 1; i >= 0; i-- {
			if e.ids[i] == id {
				body := e.bodies[i]
				e.mu.Unlock()
				return body
			}
		}
		e.mu.Unlock()
	}
	return nil
}
