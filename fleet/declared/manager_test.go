package declared

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/internal/dnstest"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeEngine serves the endpoints a stock vLLM server has.
type fakeEngine struct {
	*httptest.Server
	healthy   atomic.Bool
	blockSize atomic.Int32
	start     atomic.Int64
	running   atomic.Int32
}

func newFakeEngine(t *testing.T, model string) *fakeEngine {
	e := &fakeEngine{}
	e.healthy.Store(true)
	e.blockSize.Store(16)
	e.start.Store(1000)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		if !e.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, model)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "vllm:num_requests_running{engine=\"0\",model_name=%q} %d\n", model, e.running.Load())
		fmt.Fprintf(w, "vllm:kv_cache_usage_perc{engine=\"0\",model_name=%q} 0.5\n", model)
		fmt.Fprintf(w, "vllm:cache_config_info{block_size=\"%d\",num_gpu_blocks=\"1000\"} 1\n", e.blockSize.Load())
		fmt.Fprintf(w, "process_start_time_seconds %d\n", e.start.Load())
	})
	e.Server = httptest.NewServer(mux)
	t.Cleanup(e.Close)
	return e
}

// registrySink is the registry behind the Sink interface.
type registrySink struct{ r *fleet.Registry }

func (s registrySink) Card(c *kvrpb.WorkerCard) error {
	_, err := s.r.RegisterFrom(c, time.Now(), fleet.FromDeclared)
	return err
}
func (s registrySink) Beat(h *kvrpb.Heartbeat) error {
	return s.r.Heartbeat(h, time.Now(), fleet.FromDeclared)
}
func (s registrySink) Leave(id routing.WorkerID, inc uint64) {
	s.r.Deregister(id, inc, fleet.FromDeclared)
}

func testConfig() (Config, *prometheus.CounterVec) {
	fails := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f"}, []string{"reason"})
	return Config{Interval: 20 * time.Millisecond, Timeout: time.Second, ResolveInterval: 50 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler), Failures: fails}, fails
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waittest.Until(t, 10*time.Second, what, cond)
}

func startManager(t *testing.T, cfg Config, static []Spec, dnsSpecs []DNSSpec, reg *fleet.Registry) {
	t.Helper()
	m, err := NewManager(cfg, static, dnsSpecs, registrySink{reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestStaticEngineLeavesAndComesBack(t *testing.T) {
	const liveness = 200 * time.Millisecond
	e := newFakeEngine(t, "M")
	e.running.Store(4)
	reg := fleet.NewRegistry(liveness, nil)
	cfg, _ := testConfig()
	startManager(t, cfg, []Spec{{URL: e.URL, BlockSize: 16}}, nil, reg)
	id := EngineID(e.URL)
	waitFor(t, "registration", func() bool { _, ok := reg.Engine(id); return ok })
	got, _ := reg.Engine(id)
	if got.Model != "M" || got.Endpoint != e.URL || len(got.Workers) != 1 || got.Incarnation != 1000*1000 {
		t.Fatalf("engine = %+v", got)
	}
	waitFor(t, "load from metrics", func() bool {
		l, _ := reg.Load(routing.Worker{ID: id})
		return l.ActiveRequests == 4 && l.DecodeBlocks == 500
	})

	e.healthy.Store(false)
	waitFor(t, "removal after the liveness timeout", func() bool {
		reg.Sweep(time.Now(), 0)
		_, ok := reg.Engine(id)
		return !ok
	})
	e.healthy.Store(true)
	waitFor(t, "return", func() bool { _, ok := reg.Engine(id); return ok })

	e.start.Store(2000) // the engine restarted
	waitFor(t, "new incarnation", func() bool { g, _ := reg.Engine(id); return g.Incarnation == 2000*1000 })
}

func TestBlockSizeMismatchIsNeverRegistered(t *testing.T) {
	e := newFakeEngine(t, "M")
	e.blockSize.Store(32)
	other := newFakeEngine(t, "N")
	reg := fleet.NewRegistry(time.Second, nil)
	cfg, fails := testConfig()
	startManager(t, cfg, []Spec{{URL: e.URL, BlockSize: 16}, {URL: other.URL, Model: "X", BlockSize: 16}}, nil, reg)
	waitFor(t, "both failures counted", func() bool {
		return testutil.ToFloat64(fails.WithLabelValues(ReasonBlockSize)) >= 2 && testutil.ToFloat64(fails.WithLabelValues(ReasonModel)) >= 2
	})
	if n := len(reg.Engines()); n != 0 {
		t.Fatalf("%d engines registered, want 0", n)
	}
}

// dnsServer answers A and SRV questions from a table on loopback UDP.
func dnsServer(t *testing.T, answer func(q dns.Question) []dns.RR) Resolver {
	addr := dnstest.Serve(t, answer)
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func TestDNSDiscoveryFollowsTheRecords(t *testing.T) {
	a, b := newFakeEngine(t, "M"), newFakeEngine(t, "M")
	port := func(e *fakeEngine) uint16 {
		_, p, _ := net.SplitHostPort(e.Listener.Addr().String())
		n, _ := strconv.Atoi(p)
		return uint16(n)
	}
	var both atomic.Bool
	both.Store(true)
	res := dnsServer(t, func(q dns.Question) []dns.RR {
		if q.Qtype != dns.TypeSRV || q.Name != "_http._tcp.vllm.test." {
			return nil
		}
		hdr := dns.RR_Header{Name: q.Name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 1}
		out := []dns.RR{&dns.SRV{Hdr: hdr, Port: port(a), Target: "localhost."}}
		if both.Load() {
			out = append(out, &dns.SRV{Hdr: hdr, Port: port(b), Target: "localhost."})
		}
		return out
	})
	d, err := ParseDNS("srv=_http._tcp.vllm.test,block-size=16")
	if err != nil {
		t.Fatal(err)
	}
	reg := fleet.NewRegistry(time.Minute, nil)
	cfg, _ := testConfig()
	cfg.Resolver = res
	startManager(t, cfg, nil, []DNSSpec{d}, reg)
	waitFor(t, "both engines", func() bool { return len(reg.Engines()) == 2 })
	both.Store(false)
	waitFor(t, "the dropped record's engine to leave", func() bool {
		es := reg.Engines()
		return len(es) == 1 && es[0].Endpoint == "http://localhost:"+strconv.Itoa(int(port(a)))
	})
}

func TestDNSARecords(t *testing.T) {
	e := newFakeEngine(t, "M")
	_, p, _ := net.SplitHostPort(e.Listener.Addr().String())
	res := dnsServer(t, func(q dns.Question) []dns.RR {
		if q.Qtype != dns.TypeA || q.Name != "engines.test." {
			return nil
		}
		return []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(127, 0, 0, 1)}}
	})
	d, err := ParseDNS("name=engines.test,port=" + p)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := d.Resolve(context.Background(), res)
	if err != nil || len(specs) != 1 || specs[0].URL != "http://127.0.0.1:"+p {
		t.Fatalf("Resolve = %+v, %v", specs, err)
	}
}

// TestDisaggRoleFromServerInfo: an engine declared without a role takes
// the one its own server information gives (SGLang's disaggregation mode
// and bootstrap port); a declared role wins over it.
func TestDisaggRoleFromServerInfo(t *testing.T) {
	// sglang serves a fake engine's routes plus SGLang's server
	// information.
	sglang := func() *httptest.Server {
		sg := http.NewServeMux()
		sg.Handle("/", newFakeEngine(t, "M").Config.Handler)
		sg.HandleFunc("GET /server_info", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"disaggregation_mode":"prefill","disaggregation_bootstrap_port":8998,"tp_size":1}`)
		})
		s := httptest.NewServer(sg)
		t.Cleanup(s.Close)
		return s
	}
	e, declared := sglang(), sglang()
	plain := newFakeEngine(t, "M") // no server information: aggregated
	reg := fleet.NewRegistry(time.Minute, nil)
	cfg, _ := testConfig()
	decl, err := ParseSpec("url=" + declared.URL + ",role=decode")
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, cfg, []Spec{{URL: e.URL, BlockSize: 16}, {URL: plain.URL, BlockSize: 16}, decl}, nil, reg)
	waitFor(t, "three engines", func() bool { return len(reg.Workers("M")) == 3 })
	roles := map[routing.WorkerID]routing.Role{}
	for _, w := range reg.Workers("M") {
		roles[w.Worker.ID] = w.Role
	}
	if roles[EngineID(e.URL)] != routing.RolePrefill || roles[EngineID(plain.URL)] != routing.RoleAggregated ||
		roles[EngineID(declared.URL)] != routing.RoleDecode {
		t.Fatalf("roles %v", roles)
	}
	if port, _ := reg.BootstrapPort(EngineID(e.URL)); port != 8998 {
		t.Fatalf("bootstrap port %d", port)
	}
}
