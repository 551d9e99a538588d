package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

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
// every source. Unknown keys are errors that name the key and its source.
func resolveConfig(fs *pflag.FlagSet, path string, environ []string) error {
	if path != "" {
		k := koanf.New("\x00") // keys are flat; no delimiter may split them
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return fmt.Errorf("config file %s: %w", path, err)
		}
		keys := k.Keys()
		slices.Sort(keys)
		for _, key := range keys {
			if err := setFromSource(fs, key, valueString(k.Get(key)), "config file "+path); err != nil {
				return err
			}
		}
	}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
		if err := setFromSource(fs, key, val, "environment "+name); err != nil {
			return err
		}
	}
	return nil
}

// setFromSource sets the flag behind key unless the command line set it.
func setFromSource(fs *pflag.FlagSet, key, val, source string) error {
	name := strings.ReplaceAll(key, "_", "-")
	f := fs.Lookup(name)
	if f == nil || name == "config" || name == "help" {
		return fmt.Errorf("%s: unknown option %q", source, key)
	}
	if f.Changed {
		return nil
	}
	// A slice flag appends on every Set after its first, so a later source
	// replaces it explicitly instead.
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		if err := sv.Replace(strings.Split(val, ",")); err != nil {
			return fmt.Errorf("%s: %s: %w", source, key, err)
		}
		return nil
	}
	if err := fs.Set(name, val); err != nil {
		return fmt.Errorf("%s: %s: %w", source, key, err)
	}
	// Set marks the flag changed; the file must still yield to the
	// environment, which runs later and checks Changed.
	f.Changed = false
	return nil
}

// valueString renders a YAML scalar or list the way the flag parsers read
// it: lists become comma-separated.
func valueString(v any) string {
	if xs, ok := v.([]any); ok {
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

// environ supplies the environment; tests replace it.
var environ = os.Environ
