package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/kvrouter/kvrouter/bench/peers"
)

const peerModule = "github.com/llm-d/llm-d-kv-cache"

func main() {
	shape := peers.DefaultShape()
	rounds := flag.Int("rounds", 2, "interleaved rounds of every measurement")
	flag.Uint64Var(&shape.Seed, "seed", shape.Seed, "seed of the token and query generators")
	flag.IntVar(&shape.Queries, "queries", shape.Queries, "queries each index answers")
	child := flag.String("child", "", "internal: run one measurement of this subject")
	mode := flag.String("mode", "", "internal: the measurement's mode")
	round := flag.Int("round", 0, "internal: the measurement's round")
	shapeJSON := flag.String("shape", "", "internal: the measurement's shape")
	flag.Parse()
	if *child != "" {
		os.Exit(runChild(*child, peers.Mode(*mode), *round, *shapeJSON))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, shape, *rounds))
}

func run(ctx context.Context, shape peers.Shape, rounds int) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 1
	}
	cfg := peers.Config{Shape: shape, Rounds: rounds, Exe: exe, Progress: os.Stderr}
	env := peers.Env{PeerVersion: peerVersion(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		CPU: cpuModel(), CPUs: runtime.NumCPU(), LoadBefore: loadAvg()}
	results, err := peers.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 1
	}
	env.LoadAfter = loadAvg()
	if err := peers.Report(os.Stdout, cfg, env, results); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 1
	}
	return 0
}

func runChild(name string, mode peers.Mode, round int, shapeJSON string) int {
	shape, err := peers.ParseShape(shapeJSON)
	if err == nil {
		err = peers.RunChild(name, mode, round, shape, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 1
	}
	return 0
}

// peerVersion is the llm-d-kv-cache version linked into this binary.
func peerVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == peerModule {
				return d.Version
			}
		}
	}
	return "unknown"
}

// cpuModel is the first "model name" of /proc/cpuinfo, where there is one.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// loadAvg is the 1-minute load average, where the system reports one.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
