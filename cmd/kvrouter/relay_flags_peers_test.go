package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestRelayPeerDCs: the relay's peer DCs are --peer-dcs (KVR_PEER_DCS,
// peer_dcs), and the old name --peers still sets them from every source,
// with a warning; the new name wins over the old one.
func TestRelayPeerDCs(t *testing.T) {
	const eu, us = "eu=10.1.0.5:7200/10.1.0.5:8080/80ms", "us=10.2.0.5:7200/10.2.0.5:8080/90ms"
	dir := t.TempDir()
	file := func(key, val string) string {
		path := filepath.Join(dir, key+".yaml")
		if err := os.WriteFile(path, []byte(key+": ["+val+"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name     string
		args     []string
		env      []string
		file     string
		want     string
		wantWarn bool
	}{
		{name: "flag", args: []string{"--peer-dcs", eu}, want: "eu"},
		{name: "environment", env: []string{"KVR_PEER_DCS=" + eu}, want: "eu"},
		{name: "file", file: file("peer_dcs", eu), want: "eu"},
		{name: "deprecated flag", args: []string{"--peers", eu}, want: "eu", wantWarn: true},
		{name: "deprecated environment", env: []string{"KVR_PEERS=" + eu}, want: "eu", wantWarn: true},
		{name: "deprecated file", file: file("peers", eu), want: "eu", wantWarn: true},
		{name: "new flag over old environment", args: []string{"--peer-dcs", us}, env: []string{"KVR_PEERS=" + eu}, want: "us"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
			defer slog.SetDefault(prev)
			var f relayFlags
			fs := pflag.NewFlagSet("relay", pflag.ContinueOnError)
			f.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := resolveConfig(fs, tc.file, tc.env); err != nil {
				t.Fatal(err)
			}
			if err := f.resolve(); err != nil {
				t.Fatal(err)
			}
			if len(f.cfg.Peers) != 1 || f.cfg.Peers[0].DC != tc.want {
				t.Fatalf("peers %+v, want one of dc %s", f.cfg.Peers, tc.want)
			}
			warned := strings.Contains(logs.String(), "deprecated option: use --peer-dcs")
			if warned != tc.wantWarn {
				t.Fatalf("warned %v, want %v; log:\n%s", warned, tc.wantWarn, logs.String())
			}
		})
	}
}
