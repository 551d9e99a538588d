package waittest

import (
	"testing"
	"time"
)

// maxPoll caps the interval between two looks at a condition. The first
// look is immediate and the interval doubles from a millisecond, so a
// condition that is almost true costs little latency, and one that takes
// seconds (a scrape of a process's metrics page, an election) is looked
// at no more than 40 times a second.
const maxPoll = 25 * time.Millisecond

// poller yields the successive sleeps of a wait.
type poller struct{ next time.Duration }

func (p *poller) sleep() {
	if p.next == 0 {
		p.next = time.Millisecond
	}
	time.Sleep(p.next)
	p.next = min(2*p.next, maxPoll)
}

// Until polls cond until it holds and returns how long that took. It
// fails t, naming what ("the follower applied index 12"), when cond
// still does not hold after within.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return UntilNil(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilNil polls check until it returns nil and returns how long that
// took. It fails t after within, naming what and quoting check's last
// error, which should say how far from the condition the state was
// ("applied 9 of 12").
func UntilNil(t testing.TB, within time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var p poller
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > within {
			if err == errNotYet {
				t.Fatalf("timed out after %v waiting until %s", within, what)
			} else {
				t.Fatalf("timed out after %v waiting until %s: %v", within, what, err)
			}
			return 0
		}
		p.sleep()
	}
}

// Holds checks cond at every poll for the whole window and fails t,
// naming what, the first time it does not hold. It is for a property
// that must hold for a documented length of time (a number of the
// system's own intervals); when the window can instead end on an event
// the test can observe, use HoldsUntil.
func Holds(t testing.TB, window time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	var p poller
	for {
		if !cond() {
			t.Fatalf("%s stopped holding after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > window {
			return
		}
		p.sleep()
	}
}

// HoldsUntil checks cond at every poll until end holds, and fails t,
// naming what, the first time cond does not hold. end is the event that
// closes the window of the negative assertion (the registry swept twice,
// the leader committed more entries); it fails t, naming endWhat, when
// end does not hold within. cond is checked once more after end holds.
func HoldsUntil(t testing.TB, within time.Duration, what string, cond func() bool, endWhat string, end func() bool) {
	t.Helper()
	UntilNil(t, within, endWhat, func() error {
		ended := end()
		if !cond() {
			t.Fatalf("%s stopped holding before %s", what, endWhat)
		}
		if ended {
			return nil
		}
		return errNotYet
	})
}

// notYet is the error of a condition that does not hold yet.
type notYet struct{}

func (notYet) Error() string { return "not yet" }

var errNotYet error = notYet{}
