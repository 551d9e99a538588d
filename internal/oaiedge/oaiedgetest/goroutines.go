package oaiedgetest

import (
	"bytes"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
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

// GoroutinesPerRequest runs send warmSends times, then n times more, and
// returns the goroutines created per send over the n (the runtime's
// /sched/goroutines-created counter). send must complete one request
// sequentially on a warmed keep-alive connection. It fails tb when, once
// the sends' own goroutines have ended, more goroutines are alive than
// before the n: something of the path outlives its request.
func GoroutinesPerRequest(tb testing.TB, n int, send func()) float64 {
	tb.Helper()
	for range warmSends {
		send()
	}
	live := runtime.NumGoroutine()
	before := created()
	for range n {
		send()
	}
	perRequest := float64(created()-before) / float64(n)
	if !settle(live) {
		var dump bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
		tb.Errorf("%d goroutines alive after %d requests, %d before:\n%s", runtime.NumGoroutine(), n, live, dump.String())
	}
	return perRequest
}

// created is the number of goroutines the process has created.
func created() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// settle waits until at most live goroutines run, yielding meanwhile, and
// reports whether that happened within settleTimeout.
func settle(live int) bool {
	deadline := time.Now().Add(settleTimeout)
	for runtime.NumGoroutine() > live {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}
