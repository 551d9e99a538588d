//go:build !chaos

package failpoint

// Enabled reports whether failpoints are compiled in (a `-tags chaos`
// build).
const Enabled = false

// Inject does nothing outside chaos builds.
func Inject(string) {}
