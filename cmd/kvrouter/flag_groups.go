package main

import (
	"log/slog"
	"strconv"

	"github.com/spf13/pflag"
)

// flagGroup is the purpose under which a subcommand's help lists a flag.
// Every flag has exactly one, given where the flag is registered (see
// registerGroups); the help, --help-all and docs/configuration.md read it from
// the flag, so no second table names the flags of a group.
type flagGroup int

// The groups, in the order the help lists them. A subcommand uses the ones
// its flags fall in. The groups from groupAdvanced on are listed only by
// --help-all.
const (
	groupGeneral flagGroup = iota
	groupServing
	groupEngines
	groupModel
	groupEventPlane
	groupRouting
	groupSessions
	groupAdmission
	groupCluster
	groupFederation
	groupSecurity
	groupObservability
	// groupAdvanced holds tuning and rarely needed options: they work as
	// any other, and --help leaves them out to stay short.
	groupAdvanced
	// groupCompat holds the other names of options (the reference
	// router's names, --no- forms, deprecated names) and the options that
	// are themselves deprecated.
	groupCompat
	// groupNoEffect holds the options accepted so that the reference
	// router's command lines work, but whose mechanism kvrouter lacks.
	// Setting one away from its default logs one WARN (warnNoEffect); an
	// option that gains its mechanism moves to the register function of
	// its purpose, and the WARN stops with the move.
	groupNoEffect
)

// groupTitles are the headings of the help and of the documentation.
var groupTitles = map[flagGroup]string{
	groupGeneral:       "General",
	groupServing:       "Serving",
	groupEngines:       "Engines",
	groupModel:         "Simulated model",
	groupEventPlane:    "Event plane",
	groupRouting:       "Routing",
	groupSessions:      "Sessions",
	groupAdmission:     "Admission (a negative threshold is off)",
	groupCluster:       "Cluster",
	groupFederation:    "Federation",
	groupSecurity:      "Security",
	groupObservability: "Observability",
	groupAdvanced:      "Advanced",
	groupCompat:        "Compatibility: other names and deprecated options",
	groupNoEffect:      "Accepted with no effect (setting one logs a WARN)",
}

// hiddenKinds name, in the footer of --help, the kinds of flag it leaves
// out.
var hiddenKinds = map[flagGroup]string{groupAdvanced: "advanced", groupCompat: "compatibility", groupNoEffect: "no-effect"}

// inHelp reports whether --help lists the group (--help-all lists all).
func (g flagGroup) inHelp() bool { return g < groupAdvanced }

func (g flagGroup) String() string { return groupTitles[g] }

// groupAnnotation is the key of a flag's group among its annotations.
const groupAnnotation = "kvrouter_group"

// flagSection is one group's register function.
type flagSection struct {
	group flagGroup
	reg   func(*pflag.FlagSet)
}

// registerGroups registers a subcommand's options section by section, in
// the order the help lists them, and files each flag a section added
// under its group; another name of an option (an alias, a --no- form)
// goes to groupCompat whatever the section's group is, so that a function
// registering an option with its --no- form lists the option under its
// purpose and the form among the compatibility names.
func registerGroups(fs *pflag.FlagSet, sections []flagSection) {
	for _, s := range sections {
		s.reg(fs)
		fs.VisitAll(func(f *pflag.Flag) {
			if _, done := f.Annotations[groupAnnotation]; done {
				return
			}
			setGroup(f, s.group)
			if isAlias(f) {
				setGroup(f, groupCompat)
			}
		})
	}
}

func setGroup(f *pflag.Flag, g flagGroup) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[groupAnnotation] = []string{strconv.Itoa(int(g))}
}

// groupOf returns the flag's group; a flag registered outside a section is
// general.
func groupOf(f *pflag.Flag) flagGroup {
	v := f.Annotations[groupAnnotation]
	if len(v) != 1 {
		return groupGeneral
	}
	g, _ := strconv.Atoi(v[0])
	return flagGroup(g)
}

// isAlias reports whether the flag is another name of an option.
func isAlias(f *pflag.Flag) bool {
	a, ok := f.Value.(aliased)
	return ok && a.canonical() != ""
}

// warnNoEffect logs one WARN for each option of groupNoEffect whose value
// differs from its default, from whichever source it came: the option
// does nothing here, and the WARN says what happens instead.
func warnNoEffect(fs *pflag.FlagSet, log *slog.Logger) {
	visitInOrder(fs, func(f *pflag.Flag) {
		if groupOf(f) == groupNoEffect && !isAlias(f) && f.Value.String() != f.DefValue {
			log.Warn("option accepted for compatibility has no effect", "option", "--"+f.Name,
				"value", f.Value.String(), "here", helpLine(f))
		}
	})
}

// visitInOrder visits the flags in the order they were registered, which
// is the order of importance their register functions give them.
func visitInOrder(fs *pflag.FlagSet, fn func(*pflag.Flag)) {
	sorted := fs.SortFlags
	fs.SortFlags = false
	defer func() { fs.SortFlags = sorted }()
	fs.VisitAll(fn)
}
