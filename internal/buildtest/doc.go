// Package buildtest builds the kvrouter binary for the test suites that
// run it as processes (chaos, security, deploy): once per test binary,
// into a temporary directory, with the go tool that runs the tests.
//
// It holds no product code: only test suites import it.
package buildtest
