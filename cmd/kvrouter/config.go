package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix is the prefix of kvrouter's environment variables.
const EnvPrefix = "KVR_"

// resolveConfig applies the one documented precedence of every subcommand's
// options: built-in default < YAML file (--config) < KVR_* environment <
// command-line flag. Every option is a flag (so --help lists it with its
// default); the file and the environment name the same options with
// underscores (http_addr, KVR_HTTP_ADDR for --http-addr) and are applied by
// setting the flags the command line left alone, so one parser validates
// every source. The file is --config, or KVR_CONFIG when the flag is
// unset. Unknown file keys are errors that name the key and the file;
// unknown KVR_* variables are logged once and ignored. The reference
// router's DYN_* variables rank between the file and KVR_* (see
// env_reference.go), and an option's other names count as set when one of
// them is (flag_values.go).
func resolveConfig(fs *pflag.FlagSet, path string, environ []string) error {
	syncAliases(fs)
	if path == "" {
		path = configFromEnv(environ)
	}
	if path != "" {
		k, err := loadFile(path)
		if err != nil {
			return err
		}
		for _, key := range slices.Sorted(slices.Values(k.Keys())) {
			if err := setFromSource(fs, key, valueStrings(k.Get(key)), "config file "+path); err != nil {
				return err
			}
		}
	}
	if err := applyReferenceEnv(fs, environ); err != nil {
		return err
	}
	var ignored []string
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || name == configEnv {
			continue
		}
		key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
		if optionFlag(fs, key) == nil {
			ignored = append(ignored, name)
			continue
		}
		if err := setFromSource(fs, key, []string{val}, "environment "+name); err != nil {
			return err
		}
	}
	if len(ignored) > 0 {
		// Kubernetes injects KVR_SERVICE_HOST and friends into every pod of
		// a namespace with a Service named kvr, and one environment often
		// serves several subcommands: a variable no option of this one
		// names is no reason to stop.
		slices.Sort(ignored)
		slog.Warn("ignoring environment variables that name no option of this command", "variables", strings.Join(ignored, ","))
	}
	return nil
}

// envName is the KVR_* variable of the flag name.
func envName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// configEnv names the configuration file when --config does not.
const configEnv = EnvPrefix + "CONFIG"

// configFromEnv returns KVR_CONFIG's value, or "".
func configFromEnv(environ []string) string {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, configEnv+"="); ok {
			return v
		}
	}
	return ""
}

// loadFile reads a YAML file of options. Options are flat keys; a nested
// map yields dotted keys (cluster.peers), which are then reported as
// unknown options in that form.
func loadFile(path string) (*koanf.Koanf, error) {
	k := koanf.New(".")
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return k, nil
}

// fileHasKey reports whether the YAML file sets key.
func fileHasKey(path, key string) bool {
	k, err := loadFile(path)
	return err == nil && k.Exists(key)
}

// optionFlag is the flag of the option key names, or nil when it names
// none of the command's options.
func optionFlag(fs *pflag.FlagSet, key string) *pflag.Flag {
	name := strings.ReplaceAll(key, "_", "-")
	if metaFlags[name] {
		return nil
	}
	return fs.Lookup(name)
}

// setFromSource sets the flag behind key unless the command line set it.
// vals is one value, or a YAML list's items.
func setFromSource(fs *pflag.FlagSet, key string, vals []string, source string) error {
	f := optionFlag(fs, key)
	if f == nil {
		return fmt.Errorf("%s: unknown option %q", source, key)
	}
	if f.Changed {
		return nil
	}
	// A slice flag appends on every Set after its first, so a later source
	// replaces it explicitly instead.
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		if err := sv.Replace(listItems(f.Value.Type(), vals)); err != nil {
			return fmt.Errorf("%s: %s: %w", source, key, err)
		}
		return nil
	}
	val := strings.Join(vals, ",")
	if err := fs.Set(f.Name, val); err != nil {
		return fmt.Errorf("%s: %s: %w", source, key, err)
	}
	// Set marks the flag changed; the file must still yield to the
	// environment, which runs later and checks Changed.
	f.Changed = false
	return nil
}

// listItems splits a list option's values into items. A repeatable flag
// whose entries hold commas themselves (stringArray: --engine
// 'url=...,model=...') takes one entry per YAML list item, and in an
// environment variable entries separated by ';' or newlines; other lists
// split on commas.
func listItems(flagType string, vals []string) []string {
	var out []string
	for _, v := range vals {
		if flagType != "stringArray" {
			out = append(out, strings.Split(v, ",")...)
			continue
		}
		for _, item := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == '\n' }) {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// valueStrings renders a YAML scalar, or each item of a YAML list, the way
// the flag parsers read it.
func valueStrings(v any) []string {
	xs, ok := v.([]any)
	if !ok {
		xs = []any{v}
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return parts
}

// environ supplies the environment; tests replace it.
var environ = os.Environ

// configKeyFlags maps the keys that the node's configuration packages name
// in their validation errors to the flags that set them, where the two
// differ (the packages name their own fields; the command line was named
// after the peers' options). It is the one translation between them; a
// key missing here names its flag with dashes for underscores.
var configKeyFlags = map[string]string{
	"policy":                     "router-mode",
	"affinity_ttl":               "session-affinity-ttl",
	"affinity_mode":              "session-affinity-mode",
	"approximate_mode":           "kv-events",
	"approx_ttl":                 "router-ttl",
	"approx_policy":              "router-approximate-cache-policy",
	"min_initial_engines":        "router-min-initial-workers",
	"predict_ttl":                "router-predicted-ttl",
	"overlap_score_credit":       "kv-overlap-score-credit",
	"overlap_score_credit_decay": "kv-overlap-score-credit-decay",
}

// keyAfterInvalid finds the key a validation error names: the first word
// after its last "invalid config: ".
var keyAfterInvalid = regexp.MustCompile(`invalid config: ([a-z][a-z0-9_]*)`)

// explainConfigError prefixes a validation error with the option it is
// about, as the user set it: "--router-mode", "environment
// KVR_ROUTER_MODE" or "config file F, key router_mode"; a default value
// is named by its flag. Errors about no single option pass unchanged.
func explainConfigError(fs *pflag.FlagSet, path string, env []string, err error) error {
	if err == nil {
		return nil
	}
	ms := keyAfterInvalid.FindAllStringSubmatch(err.Error(), -1)
	if len(ms) == 0 {
		return err
	}
	key := ms[len(ms)-1][1]
	name, ok := configKeyFlags[key]
	if !ok {
		name = strings.ReplaceAll(key, "_", "-")
	}
	f := fs.Lookup(name)
	if f == nil {
		return err
	}
	return fmt.Errorf("%s: %w", optionSource(f, path, env), err)
}

// optionSource says where the flag's value came from, in the user's
// words. resolveConfig leaves Changed set only for the command line.
func optionSource(f *pflag.Flag, path string, env []string) string {
	key, envVar := strings.ReplaceAll(f.Name, "-", "_"), envName(f.Name)
	switch {
	case f.Changed:
		return "--" + f.Name
	case slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, envVar+"=") }):
		return "environment " + envVar + " (--" + f.Name + ")"
	case path != "" && fileHasKey(path, key):
		return "config file " + path + ", key " + key + " (--" + f.Name + ")"
	}
	return "--" + f.Name + " (default " + f.DefValue + ")"
}

// explainListenError names the option that moves a listener whose address
// is taken: "127.0.0.1:8000 is in use: choose another address with
// --http-addr (KVR_HTTP_ADDR)". The option is the flag whose value is the
// address, or else ends with its port (a host name resolves to another
// form of the address).
func explainListenError(fs *pflag.FlagSet, err error) error {
	var op *net.OpError
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &op) || op.Addr == nil {
		return err
	}
	addr := op.Addr.String()
	_, port, _ := net.SplitHostPort(addr)
	var exact, byPort []string
	fs.VisitAll(func(f *pflag.Flag) {
		v := f.Value.String()
		switch {
		case v == addr:
			exact = append(exact, f.Name)
		case port != "" && strings.HasSuffix(v, ":"+port):
			byPort = append(byPort, f.Name)
		}
	})
	names := exact
	if len(names) == 0 {
		names = byPort
	}
	if len(names) != 1 {
		return fmt.Errorf("%s is in use by another process: %w", addr, err)
	}
	return fmt.Errorf("%s is in use by another process: choose another address with --%s (%s): %w", addr, names[0], envName(names[0]), err)
}
