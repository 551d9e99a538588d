package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// aliased is a flag value that is another name of a canonical flag: the
// two set the same option, and the command line setting either counts as
// setting both (syncAliases), so that a file or environment value of the
// other name cannot override it.
type aliased interface {
	canonical() string
}

// aliasValue is a second name for a flag: it shares the canonical flag's
// value.
type aliasValue struct {
	pflag.Value
	canon string
}

func (a aliasValue) canonical() string { return a.canon }

// negatedBool is the --no-X form of a boolean option X: setting it true
// sets X false.
type negatedBool struct {
	p     *bool
	canon string
}

func (n negatedBool) canonical() string { return n.canon }
func (n negatedBool) String() string    { return strconv.FormatBool(!*n.p) }
func (n negatedBool) Type() string      { return "bool" }
func (n negatedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*n.p = !v
	return nil
}

// secondsValue is a duration given in (fractional) seconds, as the
// reference router's *-secs options take it.
type secondsValue struct {
	p     *time.Duration
	canon string // "" when the option has no other name
}

func (s secondsValue) canonical() string { return s.canon }
func (s secondsValue) String() string    { return strconv.FormatFloat(s.p.Seconds(), 'g', -1, 64) }
func (s secondsValue) Type() string      { return "seconds" }
func (s secondsValue) Set(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > math.MaxInt64/float64(time.Second) {
		return fmt.Errorf("%q: want a non-negative number of seconds", v)
	}
	*s.p = time.Duration(f * float64(time.Second))
	return nil
}

// addAlias registers name as another name of the existing flag canon.
func addAlias(fs *pflag.FlagSet, name, canon, usage string) {
	c := fs.Lookup(canon)
	f := fs.VarPF(aliasValue{Value: c.Value, canon: canon}, name, "", usage)
	f.NoOptDefVal = c.NoOptDefVal
	f.DefValue = c.DefValue
}

// addBool registers a boolean option with its --no- form, the reference
// router's BooleanOptionalAction style.
func addBool(fs *pflag.FlagSet, p *bool, name string, def bool, usage string) {
	fs.BoolVar(p, name, def, usage)
	addNegation(fs, p, "no-"+name, name)
}

// addNegation registers name as the negation of the boolean option canon,
// whose value p holds.
func addNegation(fs *pflag.FlagSet, p *bool, name, canon string) {
	f := fs.VarPF(negatedBool{p: p, canon: canon}, name, "", "--"+canon+"=false")
	f.NoOptDefVal = "true"
	f.DefValue = strconv.FormatBool(!*p)
}

// addSeconds registers an option in seconds; canon, when set, is the
// kvrouter duration flag of the same option.
func addSeconds(fs *pflag.FlagSet, p *time.Duration, name, canon, usage string) {
	f := fs.VarPF(secondsValue{p: p, canon: canon}, name, "", usage)
	f.DefValue = secondsValue{p: p}.String()
}

// syncAliases makes every name of an option count as set on the command
// line when one of them was, before the file and the environment are
// applied to the names left alone. It marks in two passes, so that a name
// visited before the one the command line used is marked as well.
func syncAliases(fs *pflag.FlagSet) {
	set := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			set[optionName(f)] = true
		}
	})
	fs.VisitAll(func(f *pflag.Flag) {
		if set[optionName(f)] {
			f.Changed = true
		}
	})
}

// optionName is the name of the option a flag sets: its canonical flag's
// for another name, else its own.
func optionName(f *pflag.Flag) string {
	if a, ok := f.Value.(aliased); ok && a.canonical() != "" {
		return a.canonical()
	}
	return f.Name
}
