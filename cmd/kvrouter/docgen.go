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

// optionsTable renders the node's options as one Markdown table: each
// option under its kvrouter name with its other names (reference aliases,
// --no- forms), its KVR_* and DYN_* variables, its default and its help.
// The table in docs/configuration.md is this function's output, checked
// by TestConfigurationDocIsGenerated, so it cannot drift from the code.
func optionsTable() string {
	var f nodeFlags
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	f.register(fs)
	others := map[string][]string{}
	var names []string
	fs.VisitAll(func(fl *pflag.Flag) {
		if a, ok := fl.Value.(aliased); ok && a.canonical() != "" {
			others[a.canonical()] = append(others[a.canonical()], "--"+fl.Name)
			return
		}
		names = append(names, fl.Name)
	})
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(docBegin + "\n")
	b.WriteString("| option | other names | environment | default | meaning |\n|---|---|---|---|---|\n")
	for _, name := range names {
		fl := fs.Lookup(name)
		alias := others[name]
		envs := []string{"`" + EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "`"}
		for _, n := range append([]string{name}, trimDashes(alias)...) {
			for _, e := range referenceEnvOf(n) {
				envs = append(envs, "`"+e+"`")
			}
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", name, codeList(alias), strings.Join(envs, " "),
			cell(fl.DefValue), cell(fl.Usage))
	}
	b.WriteString(docEnd + "\n")
	return b.String()
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
