// Package waittest waits, in tests, for the condition a test depends on
// rather than for a length of time. A fixed sleep that stands for "until
// X has happened" passes on the machine it was tuned on and fails on a
// slower one (or hides a bug on a faster one); a wait on X itself, with
// a generous deadline, passes wherever X happens and, when X does not,
// fails with a message that names it.
//
// Until waits for a condition; UntilNil waits for a check to stop
// reporting an error and quotes its last one on failure. Holds and
// HoldsUntil are for negative assertions ("X does not happen"): they
// check the condition at every poll over a window, which must be a bound
// the test documents (a number of sweeps, entries committed meanwhile),
// and the test must show elsewhere that X does happen when it should
// (the positive control). docs/testing.md states the rule.
//
// Deadlines are failure bounds, not expectations: a condition usually
// holds within milliseconds, and the deadline only decides how long a
// broken build hangs before it reports. Pick them large (seconds, tens of
// seconds for multi-process clusters) so that a loaded CI machine never
// reaches them.
//
// Every function polls from the calling goroutine and starts none, so it
// leaks nothing for goleak to report. The package holds no product code:
// only tests import it.
package waittest
