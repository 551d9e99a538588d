package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
)

// ErrConfig reports an unusable run configuration.
var ErrConfig = errors.New("peers: invalid configuration")

// Config is one comparison run.
type Config struct {
	// Shape is the fleet and query sequence every subject sees.
	Shape Shape
	// Rounds is how many times each measurement repeats; rounds are
	// interleaved (every subject once, then again), so that a change in
	// the machine's load shows as a range instead of as a ratio.
	Rounds int
	// Exe is the program re-executed for each measurement with ChildArgs;
	// normally os.Executable().
	Exe string
	// Progress receives one line per finished measurement (may be nil).
	Progress io.Writer
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Rounds <= 0 {
		return fmt.Errorf("%w: %d rounds", ErrConfig, c.Rounds)
	}
	if c.Exe == "" {
		return fmt.Errorf("%w: no program to run measurements with", ErrConfig)
	}
	return c.Shape.Validate()
}

// ChildArgs are the arguments that make the program run one measurement
// and print its Result as JSON (see RunChild).
func ChildArgs(name string, mode Mode, round int, s Shape) []string {
	shape, _ := json.Marshal(s) // Shape has only numbers: it always encodes.
	return []string{"-child", name, "-mode", string(mode), "-round", strconv.Itoa(round), "-shape", string(shape)}
}

// RunChild performs one measurement and writes its Result to w as JSON.
func RunChild(name string, mode Mode, round int, s Shape, w io.Writer) error {
	st, err := NewStream(s)
	if err != nil {
		return err
	}
	res, err := Measure(name, mode, round, st)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(res)
}

// Run measures every subject in both modes, each in its own process,
// interleaved round by round, and returns the results in run order.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var out []Result
	for round := 1; round <= cfg.Rounds; round++ {
		for _, mode := range []Mode{ModeKeys, ModeTokens} {
			for _, name := range Names() {
				res, err := runOne(ctx, cfg, name, mode, round)
				if err != nil {
					return out, err
				}
				if cfg.Progress != nil {
					fmt.Fprintf(cfg.Progress, "round %d %-6s %-9s %.2f M block events/s\n",
						round, mode, name, res.BlockEventsPerSec/1e6)
				}
				out = append(out, res)
			}
		}
	}
	return out, nil
}

// runOne runs one measurement process and decodes its result.
func runOne(ctx context.Context, cfg Config, name string, mode Mode, round int) (Result, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, cfg.Exe, ChildArgs(name, mode, round, cfg.Shape)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("%s %s round %d: %w: %s", name, mode, round, err, stderr.Bytes())
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return Result{}, fmt.Errorf("%s %s round %d: decoding result: %w", name, mode, round, err)
	}
	return res, nil
}
