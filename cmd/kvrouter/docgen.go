package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// docMarkers are the lines around the generated tables of a subcommand's
// options in docs/configuration.md.
func docMarkers(sub string) (begin, end string) {
	return "<!-- BEGIN GENERATED: kvrouter " + sub + " options (cmd/kvrouter/docgen.go) -->",
		"<!-- END GENERATED: kvrouter " + sub + " options -->"
}

// documented are the subcommands whose options docs/configuration.md
// lists, with the function that registers them.
var documented = []struct {
	sub      string
	register func(*pflag.FlagSet)
}{
	{"node", func(fs *pflag.FlagSet) { new(nodeFlags).register(fs) }},
	{"relay", func(fs *pflag.FlagSet) { new(relayFlags).register(fs) }},
	{"mocker", func(fs *pflag.FlagSet) { new(mockerFlags).register(fs) }},
}

// optionsTable renders a subcommand's options as Markdown, one table per
// group in the help's order: each option under its kvrouter name with its
// other names (reference aliases, --no- forms), its KVR_* and DYN_*
// variables, its default and its help with the details --help leaves
// out. The tables in docs/configuration.md are this function's output,
// checked by TestConfigurationDocIsGenerated, so they cannot drift from
// the code.
func optionsTable(sub string, register func(*pflag.FlagSet)) string {
	fs := pflag.NewFlagSet(sub, pflag.ContinueOnError)
	register(fs)
	others := map[string][]string{}
	groups := map[flagGroup][]*pflag.Flag{}
	visitInOrder(fs, func(fl *pflag.Flag) {
		if isAlias(fl) {
			others[optionName(fl)] = append(others[optionName(fl)], fl.Name)
			return
		}
		groups[groupOf(fl)] = append(groups[groupOf(fl)], fl)
	})
	begin, end := docMarkers(sub)
	var b strings.Builder
	b.WriteString(begin + "\n")
	for g := groupGeneral; g <= groupNoEffect; g++ {
		if len(groups[g]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n\n| option | other names | environment | default | meaning |\n|---|---|---|---|---|\n", g)
		for _, fl := range groups[g] {
			b.WriteString(optionRow(fl, others[fl.Name]))
		}
	}
	b.WriteString("\n" + end + "\n")
	return b.String()
}

// optionRow is an option's row of its group's table; alias holds its
// other names.
func optionRow(fl *pflag.Flag, alias []string) string {
	envs := []string{"`" + envName(fl.Name) + "`"}
	for _, n := range append([]string{fl.Name}, alias...) {
		for _, e := range referenceEnvOf(n) {
			envs = append(envs, "`"+e+"`")
		}
	}
	_, usage := pflag.UnquoteUsage(fl)
	meaning, details, _ := strings.Cut(usage, "\n")
	if d := strings.Join(strings.Fields(details), " "); d != "" {
		meaning += ". " + d
	}
	return fmt.Sprintf("| `--%s` | %s | %s | %s | %s |\n", fl.Name, codeList(alias), strings.Join(envs, " "),
		cell(fl.DefValue), cell(meaning))
}

// codeList renders flag names as code: `--a` `--b`.
func codeList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return "`--" + strings.Join(names, "` `--") + "`"
}

// cell makes a value safe inside a Markdown table cell.
func cell(s string) string {
	if s == "" {
		return ""
	}
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
