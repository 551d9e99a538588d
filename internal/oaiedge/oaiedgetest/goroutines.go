package oaiedgetest

import (
	"bytes"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// warmSends is how many sends precede the count: enough to open every
// keep-alive connection of the path and fill the pools it uses.
const warmSends = 5

// settleTimeout bounds the wait for the goroutines of the last send (the
// servers' background reads) to end. It is a bound on a wait, not an
// expectation of speed.
const settleTimeout = 10 * time.Second

// connGoroutines are the frames of the goroutines net/http keeps for a
// kept-alive connection, on either side. How many connections a path
// holds once it is idle is net/http's choice (a request that finds the
// idle connection not yet returned to the pool dials another, and on a
// loaded machine that happens): they are bounded by the pools, and a path
// that leaked connections would create goroutines on every request, which
// the rate GoroutinesPerRequest returns shows.
var connGoroutines = []string{
	"net/http.(*persistConn).readLoop",
	"net/http.(*persistConn).writeLoop",
	"net/http.(*conn).serve",
}

// GoroutinesPerRequest runs send warmSends times, then n times more, and
// returns the goroutines created per send over the n (the runtime's
// /sched/goroutines-created counter). send must complete one request
// sequentially on a warmed keep-alive connection. It fails tb when, once
// the sends' own goroutines have ended, a goroutine started during the n
// is still alive, other than a kept-alive connection's: something of the
// path outlives its request.
func GoroutinesPerRequest(tb testing.TB, n int, send func()) float64 {
	tb.Helper()
	for range warmSends {
		send()
	}
	before := map[string]bool{}
	for _, g := range goroutines() {
		before[g.id] = true
	}
	start := created()
	for range n {
		send()
	}
	perRequest := float64(created()-start) / float64(n)
	if left := outliving(before); len(left) > 0 {
		tb.Errorf("%d goroutines started by %d requests are alive after them:\n%s", len(left), n, strings.Join(left, "\n\n"))
	}
	return perRequest
}

// created is the number of goroutines the process has created.
func created() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// goroutine is one goroutine's id and stack, as runtime.Stack prints it.
type goroutine struct{ id, stack string }

// goroutines returns every goroutine's id and stack.
func goroutines() []goroutine {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		head, _, _ := bytes.Cut(block, []byte("\n"))
		fields := strings.Fields(string(head)) // "goroutine 12 [select]:"
		if len(fields) >= 2 && fields[0] == "goroutine" {
			out = append(out, goroutine{id: fields[1], stack: string(block)})
		}
	}
	return out
}

// outliving waits until every goroutine that is not in before and not a
// kept-alive connection's has ended, and returns the
// stacks of those still alive at settleTimeout.
func outliving(before map[string]bool) []string {
	deadline := time.Now().Add(settleTimeout)
	for {
		var left []string
		for _, g := range goroutines() {
			if !before[g.id] && !isConn(g.stack) {
				left = append(left, g.stack)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(time.Millisecond)
	}
}

// isConn reports whether stack is a kept-alive connection's goroutine.
func isConn(stack string) bool {
	for _, f := range connGoroutines {
		if strings.Contains(stack, f) {
			return true
		}
	}
	return false
}
