package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/pflag"
)

func TestKVRConfigNamesTheFile(t *testing.T) {
	path := writeYAML(t, "http_addr: 127.0.0.1:7\n")
	for _, tc := range []struct {
		name, flagPath, want string
	}{
		{"KVR_CONFIG alone", "", "127.0.0.1:7"},
		{"--config wins", writeYAML(t, "http_addr: 127.0.0.1:8\n"), "127.0.0.1:8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o testOpts
			fs, _ := testFlags(&o)
			if err := resolveConfig(fs, tc.flagPath, []string{"KVR_CONFIG=" + path}); err != nil {
				t.Fatal(err)
			}
			if o.addr != tc.want {
				t.Fatalf("addr %q, want %q", o.addr, tc.want)
			}
		})
	}
}

func TestNestedFileKeyIsNamedReadably(t *testing.T) {
	var o testOpts
	fs, _ := testFlags(&o)
	err := resolveConfig(fs, writeYAML(t, "cluster:\n  peers: x\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `"cluster.peers"`) || strings.Contains(err.Error(), "\x00") {
		t.Fatalf("err = %q", err)
	}
}

func TestConfigErrorNamesTheOptionAsSet(t *testing.T) {
	path := writeYAML(t, "router_mode: bogus\n")
	verr := errors.New("dispatch: invalid config: policy: unknown \"bogus\"")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		path string
		want string
	}{
		{"flag", []string{"--router-mode", "bogus"}, nil, "", "--router-mode: "},
		{"environment", nil, []string{"KVR_ROUTER_MODE=bogus"}, "", "environment KVR_ROUTER_MODE (--router-mode): "},
		{"file", nil, nil, path, "config file " + path + ", key router_mode (--router-mode): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			fs.String("router-mode", "kv", "")
			fs.String("config", "", "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := resolveConfig(fs, tc.path, tc.env); err != nil {
				t.Fatal(err)
			}
			got := explainConfigError(fs, tc.path, tc.env, verr)
			if !strings.HasPrefix(got.Error(), tc.want) || !errors.Is(got, verr) {
				t.Fatalf("got %q, want prefix %q", got, tc.want)
			}
		})
	}
}

func TestBootstrapWithJoinFollowsMembership(t *testing.T) {
	peers := "kvrouter-0=a:7000/a:7100,kvrouter-1=b:7000/b:7100,kvrouter-2=c:7000/c:7100"
	for _, tc := range []struct {
		id            string
		bootstrap     bool
		join          string
		wantBootstrap bool
		wantJoin      string
	}{
		{"kvrouter-0", true, "api:7100", true, ""},
		{"kvrouter-3", true, "api:7100", false, "api:7100"},
		{"kvrouter-0", true, "", true, ""},
		{"kvrouter-3", false, "api:7100", false, "api:7100"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			var f nodeFlags
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			f.register(fs)
			args := []string{"--node-id", tc.id, "--peers", peers, "--join=" + tc.join}
			if tc.bootstrap {
				args = append(args, "--bootstrap")
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := f.resolve(fs, slog.Default()); err != nil {
				t.Fatal(err)
			}
			if cc := f.cfg.Cluster; cc.Bootstrap != tc.wantBootstrap || cc.Join != tc.wantJoin {
				t.Fatalf("bootstrap %v join %q", cc.Bootstrap, cc.Join)
			}
		})
	}
}

func TestPortInUseNamesTheFlag(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("http-addr", addr, "")
	fs.String("nats-listen", "127.0.0.1:0", "")
	_, lerr := net.Listen("tcp", addr)
	got := explainListenError(fs, fmt.Errorf("http_addr %s: %w", addr, lerr))
	if !strings.Contains(got.Error(), "--http-addr (KVR_HTTP_ADDR)") || !errors.Is(got, syscall.EADDRINUSE) {
		t.Fatalf("got %v", got)
	}
	other := errors.New("something else")
	if explainListenError(fs, other) != other {
		t.Fatal("an error that is not about a taken port must pass unchanged")
	}
}
