package buildtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Kvrouter builds cmd/kvrouter into a new temporary directory named after
// prefix and returns the binary's path and a function that removes the
// directory. moduleDir is the directory of kvrouter's go.mod relative to
// the caller's working directory ("" when the caller is inside the
// module); the build uses that module's go.mod and go.sum, as `make
// build` does. The go tool's output goes to stderr.
func Kvrouter(prefix, moduleDir string) (string, func(), error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	bin := filepath.Join(dir, "kvrouter")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(goTool, "build", "-o", bin, "github.com/kvrouter/kvrouter/cmd/kvrouter")
	if moduleDir != "" {
		build = exec.Command(goTool, "build", "-o", bin, "./cmd/kvrouter")
		build.Dir = moduleDir
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		cleanup()
		return "", nil, err
	}
	return bin, cleanup, nil
}
