package main

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

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
