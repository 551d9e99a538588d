package deploy

import (
	"net"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// listenerTLS maps each listener option of node and relay to an option
// that must be set with it, the listener's TLS (docs/security.md, "Secure
// by default"): the binary refuses a listener off loopback without it
// unless --insecure, which no deployment here uses.
var listenerTLS = map[string]map[string]string{
	"node": {
		"KVR_HTTP_ADDR":        "KVR_TLS_CERT",
		"KVR_ADMIN_ADDR":       "KVR_TLS_CERT",
		"KVR_RAFT_ADDR":        "KVR_CLUSTER_TLS_CERT",
		"KVR_CLUSTER_API_ADDR": "KVR_CLUSTER_TLS_CERT",
		"KVR_NATS_LISTEN":      "KVR_NATS_LISTEN_TLS_CERT",
	},
	"relay": {
		"KVR_GATEWAY_ADDR": "KVR_GATEWAY_TLS_CERT",
		"KVR_ADMIN_ADDR":   "KVR_GATEWAY_TLS_CERT",
		"KVR_PUBLISH_ADDR": "KVR_WAN_TLS_CERT",
	},
}

// checkListeners fails for a listener off loopback without its TLS, and
// for --insecure.
func checkListeners(t *testing.T, where, sub string, env map[string]string) {
	t.Helper()
	if v, ok := env["KVR_INSECURE"]; ok {
		t.Errorf("%s: KVR_INSECURE=%s: every deployment here runs TLS", where, v)
	}
	for addr, tlsOpt := range listenerTLS[sub] {
		v, ok := env[addr]
		if !ok || loopback(v) {
			continue // the defaults are loopback
		}
		if env[tlsOpt] == "" {
			t.Errorf("%s: %s=%s is off loopback, and %s is unset", where, addr, v, tlsOpt)
		}
	}
}

// loopback reports whether a listen address is on loopback.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func TestEveryListenerHasTLS(t *testing.T) {
	for _, dc := range []string{"dc1", "dc2"} {
		for _, w := range workloads(decodeAll(t, build(t, "kubernetes/overlays/"+dc))) {
			c := w.spec.Containers[0]
			if !strings.Contains(c.Image, "kvrouter") {
				continue
			}
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			checkListeners(t, dc+"/"+w.name, c.Args[0], env)
		}
	}
	for name, s := range composeServices(t) {
		if s.Image == "kvrouter" {
			checkListeners(t, "compose "+name, s.Command[0], s.Environment)
		}
	}
}

// TestPrometheusPresentsTheOperatorToken: /metrics is an operator route
// on every listener off loopback, so the kvrouter scrape job must present
// a bearer token (the StatefulSet test scrapes the pods the same way).
func TestPrometheusPresentsTheOperatorToken(t *testing.T) {
	b, err := os.ReadFile("prometheus/scrape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			Authorization *struct {
				Type            string `json:"type"`
				CredentialsFile string `json:"credentials_file"`
			} `json:"authorization"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, j := range cfg.ScrapeConfigs {
		if j.JobName != "kvrouter" {
			continue
		}
		if a := j.Authorization; a == nil || a.Type != "Bearer" || a.CredentialsFile == "" {
			t.Fatalf("job kvrouter: authorization %+v, want a Bearer credentials_file", a)
		}
		return
	}
	t.Fatal("no kvrouter scrape job")
}
