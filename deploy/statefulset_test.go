package deploy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	natsserver "github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kvrouter/kvrouter/internal/dnstest"
)

// podNet is the loopback network the test's pods live on: pod i of the
// StatefulSet at podIP(i), NATS at natsIP. Distinct loopback addresses
// let every pod listen on the ports the manifest gives it.
const podNet = "127.77.0."

func podIP(i int) string { return podNet + strconv.Itoa(i+1) }

const natsIP = podNet + "100"

// TestStatefulSetFormsAClusterAndRejoins runs the router StatefulSet of the
// dc1 overlay as the kubelet would, ordinals 0-2 with the manifest's own
// arguments and environment, and names resolved as the cluster DNS
// resolves them. The three members must form one cluster with no operator
// action, ordinal 0, restarted with an empty disk, must rejoin it, and
// ordinal 3, a scale-out, must join it.
func TestStatefulSetFormsAClusterAndRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process: skipped in -short")
	}
	objs := decodeAll(t, build(t, "kubernetes/overlays/dc1"))
	sts := find[*appsv1.StatefulSet](t, objs, "kvrouter")
	ca := newTestCA(t)
	po := newPodObjects(append(objs, decodeAll(t, build(t, "kubernetes/federation"))...), ca)
	resolver := serveClusterDNS(t, sts.Spec.ServiceName)
	startNATS(t, ca, find[*certificate](t, objs, "kvrouter-nats"))

	root := t.TempDir()
	members := make([]*member, 3)
	for i := range members {
		members[i] = &member{ordinal: i, root: filepath.Join(root, fmt.Sprintf("kvrouter-%d", i))}
		members[i].start(t, sts, po, resolver)
	}
	// Prometheus presents the DC's operator token (prometheus/scrape.yaml).
	client := podClient(ca, string(po.secret(t, "kvrouter-auth", "operator-token")))
	leader := waitCluster(t, client, members, 3, 0)
	t.Logf("cluster formed: leader kvrouter-%d, commit index %v", leader.ordinal, leader.last["kvrouter_raft_commit_index"])
	commit := leader.last["kvrouter_raft_commit_index"]

	m0 := members[0]
	m0.stop(t)
	if err := os.RemoveAll(filepath.Join(m0.root, "data")); err != nil {
		t.Fatal(err)
	}
	m0.start(t, sts, po, resolver)
	waitCluster(t, client, members, 3, commit)
	if m0.last["kvrouter_raft_applied_index"] < commit {
		t.Fatalf("kvrouter-0 applied %v after rejoining, the cluster had committed %v", m0.last["kvrouter_raft_applied_index"], commit)
	}

	// A scale-out: ordinal 3 is no initial member, so it joins.
	m3 := &member{ordinal: 3, root: filepath.Join(root, "kvrouter-3")}
	m3.start(t, sts, po, resolver)
	waitCluster(t, client, append(members, m3), 4, commit)
}

// member is one pod of the StatefulSet, run as a process.
type member struct {
	ordinal int
	root    string
	pod     *pod
	cmd     *exec.Cmd
	done    chan struct{}
	log     *os.File
	last    map[string]float64 // its last scraped raft metrics
}

func (m *member) start(t *testing.T, sts *appsv1.StatefulSet, po podObjects, resolver string) {
	t.Helper()
	name := fmt.Sprintf("%s-%d", sts.Name, m.ordinal)
	m.pod = newPod(t, &sts.Spec.Template.Spec, name, sts.Namespace, podIP(m.ordinal), m.root, po)
	m.cmd = exec.Command(binary, m.pod.args...)
	// The pod's environment only, plus the address of the test's cluster
	// DNS, which a pod gets from its resolv.conf.
	m.cmd.Env = append(m.pod.env, "KVR_DNS_SERVER="+resolver, "PATH="+os.Getenv("PATH"))
	var err error
	if m.log, err = os.OpenFile(filepath.Join(m.root, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		t.Fatal(err)
	}
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.done = make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() { m.stop(t) })
}

// stop sends SIGTERM, as the kubelet does, and waits for the exit.
func (m *member) stop(t *testing.T) {
	t.Helper()
	select {
	case <-m.done:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	_ = m.log.Close()
}

func (m *member) tail() string {
	b, _ := os.ReadFile(filepath.Join(m.root, "log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// waitCluster waits until every member reports voters raft voters, knows a
// leader in one common term, exactly one of them leads, and each has
// applied at least minApplied; it returns the leader.
func waitCluster(t *testing.T, client *http.Client, members []*member, voters, minApplied float64) *member {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var why string
	for time.Now().Before(deadline) {
		var leader *member
		why = ""
		terms := map[float64]bool{}
		for _, m := range members {
			met, err := scrapeRaft(client, m)
			m.last = met
			switch {
			case err != nil:
				why = fmt.Sprintf("kvrouter-%d: %v", m.ordinal, err)
			case met["kvrouter_raft_voters"] != voters:
				why = fmt.Sprintf("kvrouter-%d sees %v voters", m.ordinal, met["kvrouter_raft_voters"])
			case met["kvrouter_raft_has_leader"] != 1:
				why = fmt.Sprintf("kvrouter-%d knows no leader", m.ordinal)
			case met["kvrouter_raft_applied_index"] < minApplied:
				why = fmt.Sprintf("kvrouter-%d applied %v < %v", m.ordinal, met["kvrouter_raft_applied_index"], minApplied)
			}
			if met["kvrouter_raft_leader"] == 1 {
				if leader != nil {
					why = "two leaders"
				}
				leader = m
			}
			terms[met["kvrouter_raft_term"]] = true
		}
		if why == "" && leader != nil && len(terms) == 1 {
			return leader
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, m := range members {
		t.Logf("kvrouter-%d log:\n%s", m.ordinal, m.tail())
	}
	t.Fatalf("no cluster of %v voters: %s", voters, why)
	return nil
}

// scrapeRaft reads the member's kvrouter_raft_* gauges from /metrics,
// over HTTPS with the operator token, as Prometheus would.
func scrapeRaft(client *http.Client, m *member) (map[string]float64, error) {
	name := fmt.Sprintf("kvrouter-%d.kvrouter-peers", m.ordinal)
	resp, err := client.Get("https://" + name + ":8000/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "kvrouter_raft_") {
			continue
		}
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

// podClient verifies the pods' certificates against the test CA, dialling
// a pod's stable name at its loopback address, and presents token.
func podClient(ca *testCA, token string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, _ := net.SplitHostPort(addr)
		if ord, ok := strings.CutSuffix(host, ".kvrouter-peers"); ok {
			i, err := strconv.Atoi(strings.TrimPrefix(ord, "kvrouter-"))
			if err == nil {
				addr = net.JoinHostPort(podIP(i), port)
			}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	tr := &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: ca.pool(), MinVersion: tls.VersionTLS12}}
	return &http.Client{Timeout: 2 * time.Second, Transport: bearer{token, tr}}
}

// bearer adds an Authorization: Bearer header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// serveClusterDNS answers as the cluster DNS would for the names the
// manifests use: each pod's name in the headless Service, the
// cluster-API Service (any member: ordinal 0) and NATS. Search-domain
// suffixes are ignored.
func serveClusterDNS(t *testing.T, headless string) string {
	t.Helper()
	return dnstest.Serve(t, func(q dns.Question) []dns.RR {
		if q.Qtype != dns.TypeA {
			return nil
		}
		ip := ""
		for i := range 8 {
			if strings.HasPrefix(q.Name, fmt.Sprintf("kvrouter-%d.%s.", i, headless)) {
				ip = podIP(i)
			}
		}
		switch {
		case strings.HasPrefix(q.Name, "kvrouter-cluster-api."):
			ip = podIP(0)
		case strings.HasPrefix(q.Name, "kvrouter-nats."):
			ip = natsIP
		}
		if ip == "" {
			return nil
		}
		return []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.ParseIP(ip)}}
	})
}

// startNATS runs the DC's NATS server at natsIP:4222 with the certificate
// its Certificate object describes, trusting the test's operator so that
// only the pods' credentials connect.
func startNATS(t *testing.T, ca *testCA, c *certificate) {
	t.Helper()
	dir := t.TempDir()
	ca.issue(t, dir, namesOf(t, c), secretFiles)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	opts := &natsserver.Options{Host: natsIP, Port: 4222, NoLog: true, NoSigs: true,
		TLS: true, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	natsAccounts(t).configure(t, opts)
	s, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(s.Shutdown)
}
