package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A flag's usage is one line of help, optionally followed by details
// after a newline: the help prints the line, docs/configuration.md the
// line and its details. A back-quoted word names the value, as in pflag.
const (
	// helpWidth is the widest line the help prints, so that it reads in
	// a terminal beside another without wrapping into the next flag.
	helpWidth = 100
	// nameColumn is the widest flag name the help aligns the text to; a
	// longer name pushes only its own line's text to the right.
	nameColumn = 36
)

// installHelp gives cmd a --help that lists its flags by group, leaving
// out the groups that are not flagGroup.inHelp, and a --help-all that
// lists every flag. Call it after the command's flags are registered.
func installHelp(cmd *cobra.Command) {
	fs := cmd.Flags()
	cmd.InitDefaultHelpFlag()
	fs.Lookup("help").Usage = "the flags by purpose"
	var all bool
	fs.BoolVar(&all, "help-all", false, "every flag, also those --help leaves out")
	for _, name := range []string{"help", "help-all"} {
		setGroup(fs.Lookup(name), groupGeneral)
	}
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		if err := writeHelp(c.OutOrStdout(), c, false); err != nil {
			c.PrintErrln(err)
		}
	})
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if all {
			return writeHelp(c.OutOrStdout(), c, true)
		}
		return run(c, args)
	}
}

// metaFlags are flags that are no options: they select the file of the
// others or print help, so neither a file nor the environment sets them.
var metaFlags = map[string]bool{"config": true, "help": true, "help-all": true}

// writeHelp prints the command's description, its usage line and its
// flags by group: those --help lists, or with all every one.
func writeHelp(w io.Writer, cmd *cobra.Command, all bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nUsage:\n  %s\n", strings.TrimSpace(cmd.Long), cmd.UseLine())
	groups := map[flagGroup][]*pflag.Flag{}
	visitInOrder(cmd.Flags(), func(f *pflag.Flag) { groups[groupOf(f)] = append(groups[groupOf(f)], f) })
	col, hidden, kinds := nameWidth(groups), 0, []string(nil)
	for g := groupGeneral; g <= groupNoEffect; g++ {
		if len(groups[g]) == 0 {
			continue
		}
		if !all && !g.inHelp() {
			hidden, kinds = hidden+len(groups[g]), append(kinds, hiddenKinds[g])
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n", g)
		for _, f := range groups[g] {
			b.WriteString(flagLine(f, col) + "\n")
		}
	}
	if hidden > 0 {
		fmt.Fprintf(&b, "\n%s --help-all lists %d more: %s flags.\n", cmd.CommandPath(), hidden, andList(kinds))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// nameWidth is the column the flags' text starts at, less its margin:
// that of the flags --help lists, so that --help-all aligns the same.
func nameWidth(groups map[flagGroup][]*pflag.Flag) int {
	col := 0
	for g, fs := range groups {
		for _, f := range fs {
			if n := len(flagName(f)); g.inHelp() && n <= nameColumn {
				col = max(col, n)
			}
		}
	}
	return col
}

// flagLine is one flag's line: its name and value, its help and its
// default, unless the help states it. A list default too long for the
// line is shortened to its first item (docs/configuration.md has it
// whole).
func flagLine(f *pflag.Flag, col int) string {
	name, help := flagName(f), helpLine(f)
	line := name + strings.Repeat(" ", max(col-len(name), 0)+2) + help
	def := defaultText(f)
	if def == "" || strings.Contains(help, "(default") {
		return line
	}
	first, _, many := strings.Cut(strings.Trim(def, "[]"), ",")
	if full := line + " (default " + def + ")"; len(full) <= helpWidth || !strings.HasPrefix(def, "[") || !many {
		return full
	}
	return line + " (default [" + first + ",...])"
}

// flagName is "  --name value" or "  -n, --name value".
func flagName(f *pflag.Flag) string {
	value, _ := pflag.UnquoteUsage(f)
	if value == "stringArray" { // repeatable; its help says so
		value = "string"
	}
	s := "  --" + f.Name
	if f.Shorthand != "" {
		s = "  -" + f.Shorthand + ", --" + f.Name
	}
	if value != "" {
		s += " " + value
	}
	return s
}

// defaultText is the default as the help shows it: none for an alias
// (its option's line shows it) or a zero value, quoted for a string.
func defaultText(f *pflag.Flag) string {
	switch {
	case isAlias(f), f.DefValue == "", f.DefValue == "false", f.DefValue == "0", f.DefValue == "0s", f.DefValue == "[]":
		return ""
	case f.Value.Type() == "string":
		return fmt.Sprintf("%q", f.DefValue)
	}
	return f.DefValue
}

// helpLine is the first line of the flag's usage.
func helpLine(f *pflag.Flag) string {
	_, usage := pflag.UnquoteUsage(f)
	line, _, _ := strings.Cut(usage, "\n")
	return line
}

// andList joins words as a sentence does: "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
