package load

import (
	"flag"
	"os"
	"testing"
)

// TestMain pins rapid's seed unless one is given on the command line, so a
// plain `go test` explores the same cases on every run, and keeps rapid from
// writing fail files into the package directory.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("rapid.seed"); f != nil && f.Value.String() == "0" {
		_ = f.Value.Set("20250101")
	}
	if f := flag.Lookup("rapid.nofailfile"); f != nil {
		_ = f.Value.Set("true")
	}
	os.Exit(m.Run())
}
