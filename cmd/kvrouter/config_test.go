package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type testOpts struct {
	engines  []string
	addr     string
	timeout  time.Duration
	policies []string
	verbose  bool
}

func testFlags(o *testOpts, args ...string) (*pflag.FlagSet, error) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.StringVar(&o.addr, "http-addr", "127.0.0.1:8000", "")
	fs.DurationVar(&o.timeout, "liveness-timeout", 3*time.Second, "")
	fs.StringSliceVar(&o.policies, "policies", []string{"kv"}, "")
	fs.BoolVar(&o.verbose, "verbose", false, "")
	fs.StringArrayVar(&o.engines, "engine", nil, "")
	fs.String("config", "", "")
	return fs, fs.Parse(args)
}

func writeYAML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedenceDefaultFileEnvFlag(t *testing.T) {
	path := writeYAML(t, "http_addr: 127.0.0.1:1\nliveness_timeout: 5s\npolicies: [kv, round-robin]\nverbose: true\n")
	tests := []struct {
		name     string
		env      []string
		args     []string
		addr     string
		timeout  time.Duration
		policies string
	}{
		{"file over default", nil, nil, "127.0.0.1:1", 5 * time.Second, "kv,round-robin"},
		{"env over file", []string{"KVR_HTTP_ADDR=127.0.0.1:2", "PATH=/bin"}, nil, "127.0.0.1:2", 5 * time.Second, "kv,round-robin"},
		{"env list replaces file list", []string{"KVR_POLICIES=random"}, nil, "127.0.0.1:1", 5 * time.Second, "random"},
		{"flag over env", []string{"KVR_HTTP_ADDR=127.0.0.1:2"}, []string{"--http-addr", "127.0.0.1:3"}, "127.0.0.1:3", 5 * time.Second, "kv,round-robin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o testOpts
			fs, err := testFlags(&o, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if err := resolveConfig(fs, path, tc.env); err != nil {
				t.Fatal(err)
			}
			if o.addr != tc.addr || o.timeout != tc.timeout || strings.Join(o.policies, ",") != tc.policies || !o.verbose {
				t.Fatalf("got %+v", o)
			}
		})
	}
}

func TestDefaultsWithoutSources(t *testing.T) {
	var o testOpts
	fs, _ := testFlags(&o)
	if err := resolveConfig(fs, "", nil); err != nil || o.addr != "127.0.0.1:8000" || o.timeout != 3*time.Second {
		t.Fatalf("got %+v, %v", o, err)
	}
}

func TestConfigErrorsNameKeyAndSource(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        []string
		want       []string
	}{
		{"unknown file key", "htp_addr: x\n", nil, []string{"config file", `"htp_addr"`}},
		{"bad file value", "liveness_timeout: soon\n", nil, []string{"config file", "liveness_timeout"}},
		{"bad env value", "", []string{"KVR_VERBOSE=perhaps"}, []string{"KVR_VERBOSE", "verbose"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o testOpts
			fs, _ := testFlags(&o)
			path := ""
			if tc.yaml != "" {
				path = writeYAML(t, tc.yaml)
			}
			err := resolveConfig(fs, path, tc.env)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
	var o testOpts
	fs, _ := testFlags(&o)
	if err := resolveConfig(fs, "/nonexistent.yaml", nil); err == nil || !strings.Contains(err.Error(), "/nonexistent.yaml") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestRepeatableEntriesKeepTheirCommas(t *testing.T) {
	a, b := "url=http://a:8000,model=M,block-size=64", "url=http://b:8000,model=M"
	for name, src := range map[string]struct {
		yaml string
		env  []string
	}{
		"yaml list": {yaml: "engine:\n  - " + a + "\n  - " + b + "\n"},
		"env":       {env: []string{"KVR_ENGINE=" + a + ";" + b}},
	} {
		t.Run(name, func(t *testing.T) {
			var o testOpts
			fs, _ := testFlags(&o)
			path := ""
			if src.yaml != "" {
				path = writeYAML(t, src.yaml)
			}
			if err := resolveConfig(fs, path, src.env); err != nil {
				t.Fatal(err)
			}
			if len(o.engines) != 2 || o.engines[0] != a || o.engines[1] != b {
				t.Fatalf("engines = %q", o.engines)
			}
		})
	}
}

func TestUnknownEnvironmentVariablesAreIgnored(t *testing.T) {
	var o testOpts
	fs, _ := testFlags(&o)
	env := []string{"KVR_SERVICE_HOST=10.0.0.1", "KVR_PORT_8000_TCP=tcp://10.0.0.1:8000", "KVR_HTTP_ADDR=127.0.0.1:9"}
	if err := resolveConfig(fs, "", env); err != nil || o.addr != "127.0.0.1:9" {
		t.Fatalf("addr %q, err %v", o.addr, err)
	}
}
