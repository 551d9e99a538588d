package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helpLines runs the subcommand with a help flag and returns its lines.
func helpLines(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return strings.Split(strings.TrimRight(out, "\n"), "\n")
}

// checkWidth fails for a help line over helpWidth characters.
func checkWidth(t *testing.T, what string, lines []string) {
	t.Helper()
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > helpWidth {
			t.Errorf("%s: line of %d characters, over %d:\n%s", what, n, helpWidth, l)
		}
	}
}

// TestNodeHelpIsShort: `kvrouter node --help` fits in 120 lines of at
// most 100 characters and ends by saying how to see the flags it leaves
// out; --help-all keeps to the same width.
func TestNodeHelpIsShort(t *testing.T) {
	lines := helpLines(t, "node", "--help")
	if len(lines) > 120 {
		t.Errorf("node --help: %d lines, over 120", len(lines))
	}
	checkWidth(t, "node --help", lines)
	if last := lines[len(lines)-1]; !strings.Contains(last, "kvrouter node --help-all") {
		t.Errorf("node --help ends with %q, not with how to see every flag", last)
	}
	checkWidth(t, "node --help-all", helpLines(t, "node", "--help-all"))
}

// listedFlags returns the flag names that lines list, one per line.
func listedFlags(lines []string) map[string]bool {
	listed := map[string]bool{}
	for _, l := range lines {
		l = strings.TrimPrefix(strings.TrimSpace(l), "-h, ")
		if name, ok := strings.CutPrefix(l, "--"); ok {
			listed[strings.Fields(name)[0]] = true
		}
	}
	return listed
}

// TestNodeHelpAllListsEveryFlag: --help-all lists every flag the node
// accepts, among them every flag it accepted before its help was grouped
// (testdata/node-flags.txt), and --help none of the compatibility names
// or no-effect options.
func TestNodeHelpAllListsEveryFlag(t *testing.T) {
	all := listedFlags(helpLines(t, "node", "--help-all"))
	short := listedFlags(helpLines(t, "node", "--help"))
	cmd := newNodeCmd()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !all[f.Name] {
			t.Errorf("--help-all does not list --%s", f.Name)
		}
		if g := groupOf(f); short[f.Name] != g.inHelp() {
			t.Errorf("--help lists --%s: %v, but its group is %q", f.Name, short[f.Name], g)
		}
	})
	fh, err := os.Open("testdata/node-flags.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if name := sc.Text(); cmd.Flags().Lookup(name) == nil || !all[name] {
			t.Errorf("--%s, accepted before, is gone or unlisted", name)
		}
	}
}

// TestRelayAndMockerHelpAreNarrow: the relay's and the mocker's help keep
// to the same width, and list every flag between --help and --help-all.
func TestRelayAndMockerHelpAreNarrow(t *testing.T) {
	for _, tc := range []struct {
		sub string
		cmd func() *cobra.Command
	}{{"relay", newRelayCmd}, {"mocker", newMockerCmd}} {
		t.Run(tc.sub, func(t *testing.T) {
			short, all := helpLines(t, tc.sub, "--help"), helpLines(t, tc.sub, "--help-all")
			checkWidth(t, tc.sub+" --help", short)
			checkWidth(t, tc.sub+" --help-all", all)
			listed := listedFlags(all)
			tc.cmd().Flags().VisitAll(func(f *pflag.Flag) {
				if !listed[f.Name] {
					t.Errorf("%s --help-all does not list --%s", tc.sub, f.Name)
				}
			})
		})
	}
}
