package deploy

import (
	"bufio"
	"encoding/json"

	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// metricName finds metric names in PromQL: kvrouter's and the engines'
// (vLLM's names carry a colon).
var metricName = regexp.MustCompile(`\b(kvrouter_[a-z0-9_]+|vllm:[a-z0-9_]+)`)

// queriedMetrics returns every metric the dashboard and the alert rules
// query, as families (histogram suffixes removed), with where each is used.
func queriedMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(expr, where string) {
		for _, m := range metricName.FindAllString(expr, -1) {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if f, ok := strings.CutSuffix(m, suf); ok && (strings.HasSuffix(f, "_seconds") || strings.HasSuffix(f, "_ratio") || strings.HasSuffix(f, "_tokens") || strings.HasSuffix(f, "_blocks")) {
					m = f
				}
			}
			out[m] = where
		}
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile("grafana/kvrouter-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			add(tg.Expr, "dashboard panel "+p.Title)
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	b, err = os.ReadFile("prometheus/kvrouter-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add(r.Expr, "alert "+r.Alert)
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d metric names: is the extraction broken?", len(out))
	}
	return out
}

// TestQueriedMetricsExist runs a router node (a one-member cluster), a
// simulated engine and a relay with one remote DC, sends a request
// through the relay, and checks that every metric the dashboard and the
// alert rules query is on one of their /metrics pages.
func TestQueriedMetricsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process: skipped in -short")
	}
	dir := t.TempDir()
	nodeHTTP, nats, raft, api := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	engineHTTP, gateway, publish := freeAddr(t), freeAddr(t), freeAddr(t)
	runProcess(t, dir, "node", "node", "--http-addr", nodeHTTP, "--nats-listen", nats,
		"--raft-addr", raft, "--cluster-api-addr", api, "--peers", "n1="+raft+"/"+api, "--bootstrap", "--node-id", "n1")
	waitHTTP(t, "http://"+nodeHTTP+"/health")
	runProcess(t, dir, "engine", "mocker", "--nats", "nats://"+nats, "--http-addr", engineHTTP, "--speedup", "100")
	runProcess(t, dir, "relay", "relay", "--nats", "nats://"+nats, "--nodes", "http://"+nodeHTTP, "--cluster-apis", api,
		"--gateway-addr", gateway, "--publish-addr", publish, "--peer-dcs", "dc9=127.0.0.1:1/127.0.0.1:1/1ms")
	waitHTTP(t, "http://"+nodeHTTP+"/ready")
	waitHTTP(t, "http://"+gateway+"/health")
	body := `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"` + strings.Repeat("the same prefix again ", 20) + `","max_tokens":4,"stream":true}`
	for range 2 {
		resp, err := http.Post("http://"+gateway+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = bufio.NewReader(resp.Body).WriteTo(discard{})
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("completion through the relay: %s", resp.Status)
		}
	}
	served := map[string]bool{}
	for _, u := range []string{"http://" + nodeHTTP + "/metrics", "http://" + engineHTTP + "/metrics", "http://" + gateway + "/metrics"} {
		for _, f := range families(t, u) {
			served[f] = true
		}
	}
	queried := queriedMetrics(t)
	names := make([]string, 0, len(queried))
	for n := range queried {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !served[n] {
			t.Errorf("%s (%s) is on no /metrics page of a node, an engine or a relay", n, queried[n])
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// families lists the metric families a /metrics page declares.
func families(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok {
			name, _, _ := strings.Cut(f, " ")
			out = append(out, name)
			if kind := strings.TrimPrefix(f, name+" "); kind == "counter" && !strings.HasSuffix(name, "_total") {
				out = append(out, name+"_total")
			}
		}
	}
	return out
}

// runProcess starts the binary with args, its output in dir/name.log, and
// stops it when the test ends.
func runProcess(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
}

// waitHTTP waits for url to answer 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %s", url, last)
}

// freeAddr returns a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
