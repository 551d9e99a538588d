package deploy

import (
	"fmt"
	"github.com/kvrouter/kvrouter/internal/buildtest"
	"os"
	"testing"
)

// binary is the kvrouter binary the process tests run, built once.
var binary string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	bin, cleanup, err := buildtest.Kvrouter("kvrouter-deploy-bin", "..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "building kvrouter:", err)
		return 1
	}
	defer cleanup()
	binary = bin
	return m.Run()
}
