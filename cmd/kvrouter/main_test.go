package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func TestSimJSONHasTheContractKeys(t *testing.T) {
	out, err := run(t, "sim", "--limit", "150", "--policies", "kv,round-robin", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out)
	}
	if len(rows) != 2 || rows[0]["policy"] != "kv" || rows[1]["policy"] != "round-robin" {
		t.Fatalf("rows = %v", rows)
	}
	for _, k := range []string{"policy", "hit_ratio", "bound_hit_ratio", "ttft_mean_ms", "ttft_p99_ms", "load_max_over_mean",
		"pooled_hit_ratio", "oracle_hit_ratio"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
}

// sim gen writes a trace that sim replays with every policy, and --report
// writes the HTML page.
func TestSimGenAllPoliciesAndReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rag.jsonl")
	if _, err := run(t, "sim", "gen", "--workload", "rag", "--seed", "2", "--out", path); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "sim", "--trace", path, "--limit", "100", "--engines", "2", "--policies", "all", "--json", "--report", dir)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	recommended := 0
	for _, r := range rows {
		if r["recommended"] == true {
			recommended++
		}
	}
	if len(rows) < 8 || recommended != 1 {
		t.Fatalf("%d rows, %d recommended", len(rows), recommended)
	}
	if _, err := os.Stat(filepath.Join(dir, "index.html")); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "sim", "gen", "--workload", "batch"); err == nil || !strings.Contains(err.Error(), "--workload") {
		t.Fatalf("unknown workload: err = %v", err)
	}
}

func TestSimTableAndTraceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	trace := `{"timestamp": 0, "input_length": 1024, "output_length": 4, "hash_ids": [1, 2]}
{"timestamp": 10, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2, 3]}
`
	if err := os.WriteFile(path, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "sim", "--trace", path, "--engines", "2", "--policies", "kv")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "hit ratio") || !strings.Contains(out, "kv") {
		t.Fatalf("no table:\n%s", out)
	}
}

func TestSimErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing trace", []string{"sim", "--trace", "/nonexistent.jsonl"}, "--trace"},
		{"unknown policy", []string{"sim", "--limit", "5", "--policies", "fastest"}, "fastest"},
		{"empty policies", []string{"sim", "--policies", ","}, "--policies"},
		{"bad block size", []string{"sim", "--limit", "5", "--block-size", "48"}, "block_size"},
		{"bad limit", []string{"sim", "--limit", "-1"}, "--limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "kvrouter ") {
		t.Fatalf("version: %q, %v", out, err)
	}
}

func TestRelayFlagErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		flag string
	}{
		{name: "unknown summary kind", args: []string{"--summary-kind", "xor"}, flag: "--summary-kind"},
		{name: "pool", args: []string{"--pools", "m"}, flag: "--pools"},
		{name: "peer", args: []string{"--peer-dcs", "eu=a/b"}, flag: "--peer-dcs"},
		{name: "partial wan tls", args: []string{"--wan-tls-cert", "relay.pem"}, flag: "wan_tls_cert, wan_tls_key and wan_tls_ca"},
		{name: "missing wan tls files", args: []string{"--wan-tls-cert", "no.pem", "--wan-tls-key", "no-key.pem", "--wan-tls-ca", "ca.pem"}, flag: "wan_tls_cert/wan_tls_key"},
		{name: "partial cluster tls", args: []string{"--cluster-tls-ca", "ca.pem"}, flag: "cluster_tls_cert, cluster_tls_key and cluster_tls_ca"},
		{name: "partial gateway tls", args: []string{"--gateway-tls-key", "gw-key.pem"}, flag: "gateway_tls_cert and gateway_tls_key"},
		{name: "missing gateway tls files", args: []string{"--gateway-tls-cert", "no.pem", "--gateway-tls-key", "no-key.pem"}, flag: "gateway_tls_cert/gateway_tls_key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, append([]string{"relay"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("err %v, want one naming %s", err, tc.flag)
			}
		})
	}
}

func TestRelayPeersOverHTTPS(t *testing.T) {
	for _, tc := range []struct {
		https bool
		url   string
	}{{false, "http://10.1.0.5:8080"}, {true, "https://10.1.0.5:8080"}} {
		f := relayFlags{peers: []string{"eu=10.1.0.5:7200/10.1.0.5:8080/80ms"}, peersHTTPS: tc.https}
		if err := f.resolve(); err != nil {
			t.Fatal(err)
		}
		if got := f.cfg.Peers[0].GatewayURL; got != tc.url {
			t.Fatalf("https %v: gateway URL %s, want %s", tc.https, got, tc.url)
		}
	}
}

// TestRelaySummaryKind: --summary-kind selects every kind from the flag,
// the environment or the YAML file (cuckoo by default), and a bad value
// is refused with an error naming its key and source.
func TestRelaySummaryKind(t *testing.T) {
	dir := t.TempDir()
	yamlOf := func(kind string) string {
		path := filepath.Join(dir, kind+".yaml")
		if err := os.WriteFile(path, []byte("summary_kind: "+kind+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name    string
		args    []string
		env     []string
		file    string
		want    string
		wantErr string
	}{
		{name: "default", want: "cuckoo"},
		{name: "flag bloom", args: []string{"--summary-kind", "bloom"}, want: "bloom"},
		{name: "flag compact", args: []string{"--summary-kind", "cuckoo-compact"}, want: "cuckoo-compact"},
		{name: "environment bloom", env: []string{"KVR_SUMMARY_KIND=bloom"}, want: "bloom"},
		{name: "file bloom", file: yamlOf("bloom"), want: "bloom"},
		{name: "flag over environment", args: []string{"--summary-kind", "cuckoo"}, env: []string{"KVR_SUMMARY_KIND=bloom"}, want: "cuckoo"},
		{name: "bad flag", args: []string{"--summary-kind", "xor"}, wantErr: "--summary-kind"},
		{name: "bad environment", env: []string{"KVR_SUMMARY_KIND=xor"}, wantErr: "KVR_SUMMARY_KIND: summary_kind"},
		{name: "bad file", file: yamlOf("xor"), wantErr: "summary_kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f relayFlags
			fs := pflag.NewFlagSet("relay", pflag.ContinueOnError)
			f.register(fs)
			err := fs.Parse(tc.args)
			if err == nil {
				err = resolveConfig(fs, tc.file, tc.env)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.cfg.Producer.Filter.Kind.String(); got != tc.want {
				t.Fatalf("kind %s, want %s", got, tc.want)
			}
		})
	}
}

// TestAPIKeyErrorsNameTheKeyNotTheSecret: a key that cannot go in a header
// stops the node and the mocker before they start anything, with an error
// that names the option and does not repeat the key.
func TestAPIKeyErrorsNameTheKeyNotTheSecret(t *testing.T) {
	const secret = "top secret"
	for _, tc := range []struct{ cmd, flag, key string }{
		{"node", "--engine-api-key", "engine_api_key"},
		{"mocker", "--api-key", "api_key"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			_, err := run(t, tc.cmd, "--http-addr", "127.0.0.1:0", tc.flag, secret)
			if err == nil || !strings.Contains(err.Error(), tc.key) || strings.Contains(err.Error(), secret) {
				t.Fatalf("err %v, want one naming %s without the key", err, tc.key)
			}
		})
	}
}
