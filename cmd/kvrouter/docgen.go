package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// Markers of the generated table in docs/configuration.md.
const (
	docBegin = "<!-- BEGIN GENERATED: kvrouter node options (cmd/kvrouter/docgen.go) -->"
	docEnd   = "<!-- END GENERATED: kvrouter node options -->"
)

// optionsTable renders the node's options as Markdown, one table per
// group in the help's order: each option under its kvrouter name with its
// other names (reference aliases, --no- forms), its KVR_* and DYN_*
// variables, its default and its help with the details --help leaves
// out. The tables in docs/configuration.md are this function's output,
// checked by TestConfigurationDocIsGenerated, so they cannot drift from
// the code.
func optionsTable() string {
	var f nodeFlags
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	f.register(fs)
	others := map[string][]string{}
	groups := map[flagGroup][]*pflag.Flag{}
	visitInOrder(fs, func(fl *pflag.Flag) {
		if isAlias(fl) {
			others[optionName(fl)] = append(others[optionName(fl)], "--"+fl.Name)
			return
		}
		groups[groupOf(fl)] = append(groups[groupOf(fl)], fl)
	})
	var b strings.Builder
	b.WriteString(docBegin + "\n")
	for g := groupGeneral; g <= groupNoEffect; g++ {
		if len(groups[g]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n\n| option | other names | environment | default | meaning |\n|---|---|---|---|---|\n", g)
		for _, fl := range groups[g] {
			b.WriteString(optionRow(fl, others[fl.Name]))
		}
	}
	b.WriteString("\n" + docEnd + "\n")
	return b.String()
}

// optionRow is an option's row of its group's table.
func optionRow(fl *pflag.Flag, alias []string) string {
	envs := []string{"`" + EnvPrefix + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_")) + "`"}
	for _, n := range append([]string{fl.Name}, trimDashes(alias)...) {
		for _, e := range referenceEnvOf(n) {
			envs = append(envs, "`"+e+"`")
		}
	}
	meaning := helpLine(fl)
	if d := helpDetails(fl); d != "" {
		meaning += ". " + d
	}
	return fmt.Sprintf("| `--%s` | %s | %s | %s | %s |\n", fl.Name, codeList(alias), strings.Join(envs, " "),
		cell(fl.DefValue), cell(meaning))
}

func trimDashes(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strings.TrimPrefix(x, "--")
	}
	return out
}

func codeList(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	slices.Sort(xs)
	return "`" + strings.Join(xs, "` `") + "`"
}

// cell makes a value safe inside a Markdown table cell.
func cell(s string) string {
	if s == "" {
		return ""
	}
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
