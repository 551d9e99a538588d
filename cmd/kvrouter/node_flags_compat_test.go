package main

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/node"
)

// resolveNodeLogged is resolveNode with the WARNs of resolution returned.
func resolveNodeLogged(t *testing.T, args, env []string) (node.Config, string, error) {
	t.Helper()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var f nodeFlags
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	f.register(fs)
	err := fs.Parse(args)
	if err == nil {
		err = resolveConfig(fs, f.configPath, env)
	}
	if err == nil {
		err = f.resolve(fs, log)
	}
	return f.cfg, logs.String(), err
}

// aliasCases set an option under another name and under its kvrouter
// name: both must resolve to the same configuration, as they did before
// the other names left --help.
var aliasCases = map[string]struct{ alias, canon []string }{
	"router-kv-overlap-score-credit":       {[]string{"--router-kv-overlap-score-credit=0.4"}, []string{"--kv-overlap-score-credit=0.4"}},
	"router-kv-overlap-score-credit-decay": {[]string{"--router-kv-overlap-score-credit-decay=0.3"}, []string{"--kv-overlap-score-credit-decay=0.3"}},
	"router-prefill-load-scale":            {[]string{"--router-prefill-load-scale=2"}, []string{"--prefill-load-scale=2"}},
	"router-host-cache-hit-weight":         {[]string{"--router-host-cache-hit-weight=0.5"}, []string{"--host-cache-hit-weight=0.5"}},
	"router-disk-cache-hit-weight":         {[]string{"--router-disk-cache-hit-weight=0.1"}, []string{"--disk-cache-hit-weight=0.1"}},
	"router-decode-active-request-weight":  {[]string{"--router-decode-active-request-weight=3"}, []string{"--decode-active-request-weight=3"}},
	"router-session-affinity-mode":         {[]string{"--router-session-affinity-mode=soft"}, []string{"--session-affinity-mode=soft"}},
	"router-kv-events":                     {[]string{"--router-kv-events=false"}, []string{"--kv-events=false"}},
	"no-router-kv-events":                  {[]string{"--no-router-kv-events"}, []string{"--kv-events=false"}},
	"no-kv-events":                         {[]string{"--no-kv-events"}, []string{"--kv-events=false"}},
	"router-ttl-secs":                      {[]string{"--router-ttl-secs=60"}, []string{"--router-ttl=1m"}},
	"router-predicted-ttl-secs":            {[]string{"--router-predicted-ttl-secs=5"}, []string{"--router-predicted-ttl=5s"}},
	"router-session-affinity-ttl-secs":     {[]string{"--router-session-affinity-ttl-secs=300"}, []string{"--session-affinity-ttl=5m"}},
	"kv-overlap-score-weight":              {[]string{"--kv-overlap-score-weight=2.5"}, []string{"--router-kv-overlap-score-weight=2.5"}},
	"no-load-aware":                        {[]string{"--no-load-aware=false"}, []string{"--load-aware"}},
	"no-agentic":                           {[]string{"--no-agentic=false"}, []string{"--agentic"}},
	"no-router-assume-kv-reuse":            {[]string{"--no-router-assume-kv-reuse"}, []string{"--router-assume-kv-reuse=false"}},
	"no-router-track-prefill-tokens":       {[]string{"--no-router-track-prefill-tokens"}, []string{"--router-track-prefill-tokens=false"}},
	"no-router-track-output-blocks":        {[]string{"--no-router-track-output-blocks=false"}, []string{"--router-track-output-blocks"}},
	"no-router-track-active-blocks":        {[]string{"--no-router-track-active-blocks"}, []string{"--router-track-active-blocks=false"}},
	"no-decode-fallback":                   {[]string{"--no-decode-fallback"}, []string{"--decode-fallback=false"}},
	"no-router-conditional-disagg":         {[]string{"--no-router-conditional-disagg=false"}, []string{"--router-conditional-disagg"}},
	"no-router-prefill-continue":           {[]string{"--no-router-prefill-continue=false"}, []string{"--router-prefill-continue"}},
	"no-router-replica-sync":               {[]string{"--no-router-replica-sync=false"}, []string{"--router-replica-sync"}},
	"no-serve-indexer":                     {[]string{"--no-serve-indexer=false"}, []string{"--serve-indexer"}},
	"no-use-remote-indexer":                {[]string{"--no-use-remote-indexer=false"}, []string{"--use-remote-indexer"}},
	"no-router-durable-kv-events":          {[]string{"--no-router-durable-kv-events=false"}, []string{"--router-durable-kv-events"}},
	"no-router-reset-states":               {[]string{"--no-router-reset-states=false"}, []string{"--router-reset-states"}},
}

// TestEveryAliasSetsItsOption: every other name of a node option (the
// reference's names, --no- forms, deprecated names) resolves to the same
// configuration and the same WARNs as the option's own name, or to the
// same error; and every such name has a case here.
func TestEveryAliasSetsItsOption(t *testing.T) {
	var f nodeFlags
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	f.register(fs)
	fs.VisitAll(func(fl *pflag.Flag) {
		if _, ok := aliasCases[fl.Name]; isAlias(fl) && !ok {
			t.Errorf("--%s is another name of --%s with no case in aliasCases", fl.Name, optionName(fl))
		}
	})
	for name, tc := range aliasCases {
		t.Run(name, func(t *testing.T) {
			got, gotLog, gotErr := resolveNodeLogged(t, tc.alias, nil)
			want, wantLog, wantErr := resolveNodeLogged(t, tc.canon, nil)
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("%v: err %v; %v: err %v", tc.alias, gotErr, tc.canon, wantErr)
			}
			got.Dispatch.Now, want.Dispatch.Now = nil, nil // a function: never DeepEqual
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%v and %v resolve differently:\n%+v\n%+v", tc.alias, tc.canon, got.Dispatch, want.Dispatch)
			}
			if strip(gotLog) != strip(wantLog) {
				t.Fatalf("%v logs %q; %v logs %q", tc.alias, gotLog, tc.canon, wantLog)
			}
		})
	}
}

// strip drops the time of each log record.
func strip(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if _, rest, ok := strings.Cut(l, " level="); ok {
			out = append(out, rest)
		}
	}
	return strings.Join(out, "\n")
}

// TestOtherNamesWorkFromEverySource: the file keys and KVR_* variables of
// the other names still set their option, and the command line's name
// wins over them.
func TestOtherNamesWorkFromEverySource(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      []string
		yaml     string
		approx   bool
		wantCred float64
	}{
		{name: "KVR_NO_KV_EVENTS", env: []string{"KVR_NO_KV_EVENTS=true"}, approx: true, wantCred: 1},
		{name: "KVR_KV_EVENTS", env: []string{"KVR_KV_EVENTS=false"}, approx: true, wantCred: 1},
		{name: "no_kv_events key", yaml: "no_kv_events: true\n", approx: true, wantCred: 1},
		{name: "router_kv_events key", yaml: "router_kv_events: false\n", approx: true, wantCred: 1},
		{name: "flag over other name's key", args: []string{"--kv-events"}, yaml: "no_router_kv_events: true\n", wantCred: 1},
		{name: "KVR_ROUTER_KV_OVERLAP_SCORE_CREDIT", env: []string{"KVR_ROUTER_KV_OVERLAP_SCORE_CREDIT=0.25"}, wantCred: 0.25},
		{name: "router_kv_overlap_score_credit key", yaml: "router_kv_overlap_score_credit: 0.5\n", wantCred: 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.yaml != "" {
				args = append(args, "--config", writeYAML(t, tc.yaml))
			}
			c, _, err := resolveNodeLogged(t, args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if d := c.Dispatch; d.ApproximateMode != tc.approx || d.KV.OverlapScoreCredit != tc.wantCred {
				t.Fatalf("approximate %v credit %v, want %v %v", d.ApproximateMode, d.KV.OverlapScoreCredit, tc.approx, tc.wantCred)
			}
		})
	}
}

// noEffectValues are values away from the default of each option accepted
// with no effect; "" marks one that has no such value it accepts.
var noEffectValues = map[string]string{
	"router-conditional-disagg": "true",
	"router-prefill-continue":   "true",
	"router-replica-sync":       "true",
	"serve-indexer":             "true",
	"use-remote-indexer":        "true",
	"router-event-threads":      "8",
	"router-durable-kv-events":  "true",
	"router-reset-states":       "true",
}

// TestNoEffectOptionLogsOneWarn: an option accepted with no effect logs
// exactly one WARN naming it when it is set, from the command line or the
// environment, and none at its default.
func TestNoEffectOptionLogsOneWarn(t *testing.T) {
	var f nodeFlags
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	f.register(fs)
	fs.VisitAll(func(fl *pflag.Flag) {
		if _, ok := noEffectValues[fl.Name]; groupOf(fl) == groupNoEffect && !isAlias(fl) && !ok {
			t.Errorf("--%s has no effect and no case in noEffectValues", fl.Name)
		}
	})
	_, log, err := resolveNodeLogged(t, nil, nil)
	if err != nil || strings.Contains(log, "no effect") {
		t.Fatalf("defaults: err %v, log %q", err, log)
	}
	for name, val := range noEffectValues {
		if fl := fs.Lookup(name); fl == nil || groupOf(fl) != groupNoEffect {
			t.Errorf("--%s is no longer accepted with no effect: remove its case from noEffectValues", name)
			continue
		}
		if val == "" {
			continue
		}
		env := EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "=" + val
		for _, src := range []struct {
			name      string
			args, env []string
		}{
			{"flag", []string{"--" + name + "=" + val}, nil},
			{"environment", nil, []string{env}},
			{"flag and environment", []string{"--" + name + "=" + val}, []string{env}},
		} {
			t.Run(name+"/"+src.name, func(t *testing.T) {
				_, log, err := resolveNodeLogged(t, src.args, src.env)
				if err != nil {
					t.Fatal(err)
				}
				if n := strings.Count(log, "level=WARN"); n != 1 || !strings.Contains(log, "option=--"+name+" ") {
					t.Fatalf("%d WARNs, want one naming --%s:\n%s", n, name, log)
				}
			})
		}
	}
}
