package waittest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records a failure and ends the calling goroutine, as
// testing.T's Fatalf does.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls fn with a fakeTB on its own goroutine (Fatalf ends it) and
// returns the failure message, "" when fn returned.
func run(fn func(testing.TB)) string {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// after returns a condition that holds from its nth call on.
func after(n int) func() bool {
	calls := 0
	return func() bool { calls++; return calls >= n }
}

func TestWaits(t *testing.T) {
	tests := []struct {
		name string
		fn   func(testing.TB)
		fail string // "" when the wait must pass; else a part of its message
	}{
		{name: "until at once", fn: func(tb testing.TB) { Until(tb, time.Second, "x", after(1)) }},
		{name: "until after polls", fn: func(tb testing.TB) { Until(tb, 5*time.Second, "x", after(20)) }},
		{name: "until never", fn: func(tb testing.TB) { Until(tb, 30*time.Millisecond, "the follower applied 12", after(1<<30)) },
			fail: "waiting until the follower applied 12"},
		{name: "until nil quotes the last error", fn: func(tb testing.TB) {
			UntilNil(tb, 30*time.Millisecond, "applied 12", func() error { return errors.New("applied 9 of 12") })
		}, fail: "applied 12: applied 9 of 12"},
		{name: "holds", fn: func(tb testing.TB) { Holds(tb, 20*time.Millisecond, "x", func() bool { return true }) }},
		{name: "holds broken", fn: func(tb testing.TB) { Holds(tb, time.Minute, "registered", func() bool { return false }) },
			fail: "registered stopped holding"},
		{name: "holds until", fn: func(tb testing.TB) {
			HoldsUntil(tb, 5*time.Second, "x", func() bool { return true }, "end", after(10))
		}},
		{name: "holds until broken", fn: func(tb testing.TB) {
			HoldsUntil(tb, 5*time.Second, "registered", func() bool { return false }, "two sweeps", after(10))
		}, fail: "registered stopped holding before two sweeps"},
		{name: "holds until checks after the end", fn: func(tb testing.TB) {
			ended := false
			HoldsUntil(tb, 5*time.Second, "registered", func() bool { return !ended }, "two sweeps", func() bool { ended = true; return true })
		}, fail: "registered stopped holding before two sweeps"},
		{name: "holds until no end", fn: func(tb testing.TB) {
			HoldsUntil(tb, 30*time.Millisecond, "x", func() bool { return true }, "two sweeps", after(1<<30))
		}, fail: "waiting until two sweeps"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := run(tc.fn)
			if tc.fail == "" && got != "" {
				t.Fatalf("failed: %s", got)
			}
			if tc.fail != "" && !strings.Contains(got, tc.fail) {
				t.Fatalf("failure %q, want it to contain %q", got, tc.fail)
			}
		})
	}
}
