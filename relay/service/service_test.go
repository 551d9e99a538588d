package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/freeport"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/gateway"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
	"github.com/kvrouter/kvrouter/relay/service"
	"github.com/kvrouter/kvrouter/routing"
)

const blockSize = 16

// freeAddr returns a free loopback address below the ephemeral port
// range, so that a member restarting on it can bind it again (see
// internal/freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func testLog() *slog.Logger {
	if os.Getenv("KVRTEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// dc is one DC in this process: NATS, one engine, a one-member router
// cluster (in memory) and a relay.
type dc struct {
	name    string
	gateway string // relay gateway address
	publish string
	relay   *service.Relay
	node    *node.Node
	// url is the gateway's base URL and client the client that reaches
	// it (trusting the test CA when the gateway serves HTTPS).
	url    string
	client *http.Client
}

// startFederation starts two DCs whose relays follow each other over
// loopback, with rtt as their configured WAN round trip; each option
// adjusts both DCs' node and relay configurations before they start.
func startFederation(t *testing.T, rtt time.Duration, options ...func(*node.Config, *service.Config)) (a, b *dc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	a, b = &dc{name: "dca", gateway: freeAddr(t), publish: freeAddr(t)}, &dc{name: "dcb", gateway: freeAddr(t), publish: freeAddr(t)}
	for _, pair := range [][2]*dc{{a, b}, {b, a}} {
		d, peer := pair[0], pair[1]
		bus, err := natsbus.Open(natsbus.Config{URL: natsbus.Embedded, EmbeddedAddr: "127.0.0.1:0"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { <-ctx.Done(); bus.Close() })
		startEngine(t, ctx, &wg, bus.URL(), d.name)

		cfg := node.DefaultConfig()
		cfg.DC, cfg.NodeID, cfg.HTTPAddr, cfg.NATS = d.name, d.name+"-n1", freeAddr(t), bus.URL()
		cfg.Dispatch.AffinityTTL = time.Hour
		raft, api := freeAddr(t), freeAddr(t)
		cfg.Cluster = node.ClusterConfig{RaftAddr: raft, APIAddr: api, Bootstrap: true,
			Peers: []string{fmt.Sprintf("%s=%s/%s", cfg.NodeID, raft, api)}}
		rcfg := service.Config{DC: d.name, NATS: bus.URL(), ClusterAPIs: []string{api}, GatewayAddr: d.gateway, PublishAddr: d.publish,
			Peers:             []service.Peer{{DC: peer.name, PublishAddr: peer.publish, GatewayURL: "http://" + peer.gateway, WANRTT: rtt}},
			Pools:             []gateway.Pool{{Model: mocker.DefaultModel, BlockSize: blockSize}},
			HeartbeatInterval: 100 * time.Millisecond, Log: testLog()}
		for _, o := range options {
			o(&cfg, &rcfg)
		}
		d.url, d.client = gatewayClient(t, d.gateway, &rcfg)
		n, err := node.New(cfg, testLog())
		if err != nil {
			t.Fatal(err)
		}
		d.node = n
		wg.Go(func() {
			if err := n.Run(ctx); err != nil {
				t.Errorf("%s node: %v", d.name, err)
			}
		})
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		rcfg.Nodes = []string{"http://" + n.Addr().String()}
		r, err := service.New(rcfg)
		if err != nil {
			t.Fatal(err)
		}
		d.relay = r
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				t.Errorf("%s relay: %v", d.name, err)
			}
		})
		if err := r.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []*dc{a, b} {
		waitFor(t, 20*time.Second, d.name+" ready", func() bool {
			resp, err := d.client.Get(d.url + "/ready")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200 && d.node.Ready()
		})
	}
	return a, b
}

func startEngine(t *testing.T, ctx context.Context, wg *sync.WaitGroup, url, dcName string) {
	t.Helper()
	bus, err := natsbus.Open(natsbus.Config{URL: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{DC: dcName, EngineID: 1, HeartbeatInterval: 100 * time.Millisecond,
		Engine: mocker.Config{SpeedUp: 1000, BlockSize: blockSize}}, bus.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		defer bus.Close()
		if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
			t.Errorf("engine: %v", err)
		}
	})
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tokens(seed, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (seed*7919 + i*31) % 32000
	}
	return out
}

// complete sends a completion of toks through d's gateway and returns
// the DC that served it.
func complete(t *testing.T, d *dc, session string, toks []int) string {
	t.Helper()
	return completeVia(t, d, session, toks, nil)
}

// completeVia is complete with extra request headers.
func completeVia(t *testing.T, d *dc, session string, toks []int, hdr map[string]string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": toks, "max_tokens": 2})
	req, _ := http.NewRequest("POST", d.url+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("via %s: status %d: %s", d.name, resp.StatusCode, b)
	}
	return resp.Header.Get(gateway.DCHeader)
}

// gatewayClient returns the base URL of a gateway listening on addr with
// cfg, and a client for it: plain HTTP, or HTTPS trusting cfg's WAN CA.
func gatewayClient(t *testing.T, addr string, cfg *service.Config) (string, *http.Client) {
	t.Helper()
	if cfg.GatewayTLSCert == "" {
		return "http://" + addr, http.DefaultClient
	}
	_, client, err := mtls.Load("wan_tls", cfg.WANTLS)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: client}
	t.Cleanup(tr.CloseIdleConnections)
	return "https://" + addr, &http.Client{Transport: tr}
}

// TestFederationForwardsToTheDCHoldingThePrefix: a prompt served in DC b
// is summarised by b's relay and published to a's; a longer prompt with
// that prefix arriving at a's gateway is forwarded to b, a fresh prompt
// stays local, and a session is served by one DC whichever gateway it
// arrives at.
func TestFederationForwardsToTheDCHoldingThePrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("two DCs with router clusters, relays and engines; run without -short")
	}
	a, b := startFederation(t, 5*time.Millisecond)
	longer := servedPrefixSeenBy(t, b, a)
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": longer})
	resp, err := a.client.Post(a.url+"/v1/route/explain", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		DC      string `json:"dc"`
		Remote  bool   `json:"remote"`
		Remotes []struct {
			DC       string `json:"dc"`
			Eligible bool   `json:"eligible"`
			Depth    int    `json:"depth_blocks"`
		} `json:"remotes"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ex)
	resp.Body.Close()
	if err != nil || ex.DC != b.name || !ex.Remote || len(ex.Remotes) != 1 || !ex.Remotes[0].Eligible || ex.Remotes[0].Depth < 39 {
		t.Fatalf("explain at a: %+v (%v)", ex, err)
	}
	if got := complete(t, a, "", longer); got != b.name {
		t.Fatalf("a prompt whose prefix b holds was served by %q at a's gateway", got)
	}
	if got := complete(t, a, "", tokens(3, 8*blockSize)); got != a.name {
		t.Fatalf("a fresh prompt at a's gateway was served by %q", got)
	}
	for s := range 6 {
		id := fmt.Sprintf("sess-%d", s)
		first := complete(t, a, id, tokens(10+s, 4*blockSize))
		for _, gw := range []*dc{b, a, b} {
			if got := complete(t, gw, id, tokens(20+s, 4*blockSize)); got != first {
				t.Fatalf("session %s served by %s, then by %s", id, first, got)
			}
		}
	}
}

// TestFederationWithBloomSummaries: with Bloom pool summaries, a prefix
// served in DC b reaches a's lane of b, and a longer prompt at a's
// gateway is forwarded to b.
func TestFederationWithBloomSummaries(t *testing.T) {
	if testing.Short() {
		t.Skip("two DCs with router clusters, relays and engines; run without -short")
	}
	a, b := startFederation(t, 5*time.Millisecond, func(_ *node.Config, c *service.Config) {
		c.Producer.Filter.Kind = filter.KindBloom
	})
	longer := servedPrefixSeenBy(t, b, a)
	if got := complete(t, a, "", longer); got != b.name {
		t.Fatalf("a prompt whose prefix b holds was served by %q at a's gateway", got)
	}
}

// TestFederationOverTLS runs both DCs' router clusters and the relays'
// summary publication over mutual TLS and the gateways over HTTPS: a
// relay follows its cluster's ownership stream with its cluster
// certificate, a prefix served in one DC reaches the other DC's summary
// lane over the WAN link, a longer prompt is forwarded to that DC over
// HTTPS, and a session bound in one DC is found from the other; a
// subscriber without a certificate is refused.
func TestFederationOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("two DCs with router clusters, relays and engines; run without -short")
	}
	ca := mtlstest.NewCA(t, t.TempDir())
	a, b := startFederation(t, 5*time.Millisecond, func(n *node.Config, r *service.Config) {
		m := ca.Issue(t, mtls.Identity{DC: n.DC, Role: mtls.RoleMember, Name: n.NodeID})
		n.Cluster.TLSCert, n.Cluster.TLSKey, n.Cluster.TLSCA = m.Cert, m.Key, m.CA
		relay := ca.Issue(t, mtls.Identity{DC: r.DC, Role: mtls.RoleRelay, Name: "relay-" + r.DC})
		r.ClusterTLS, r.WANTLS = relay, relay
		r.GatewayTLSCert, r.GatewayTLSKey = relay.Cert, relay.Key
		for i := range r.Peers {
			r.Peers[i].GatewayURL = "https://" + strings.TrimPrefix(r.Peers[i].GatewayURL, "http://")
		}
	})
	longer := servedPrefixSeenBy(t, b, a)
	if got := complete(t, a, "", longer); got != b.name {
		t.Fatalf("a prompt whose prefix %s holds was served by %q at %s's gateway", b.name, got, a.name)
	}
	id := homedIn(b.name, "tls-")
	first := complete(t, b, id, tokens(7, 2*blockSize))
	if got := complete(t, a, id, tokens(8, 2*blockSize)); got != first {
		t.Fatalf("session %s served by %s, then by %s", id, first, got)
	}
	cc, err := grpc.NewClient(a.publish, publish.DialOptions(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool := producer.PoolID{DC: a.name, Domain: poolDomain()}
	s, err := publish.Subscribe(ctx, kvrpb.NewRelayClient(cc), publish.Request{Pool: pool, SubscriberID: "plaintext"})
	if err == nil {
		_, err = s.Recv()
		s.Close()
	}
	if err == nil {
		t.Fatal("a plaintext subscriber was served by a relay with WAN TLS")
	}
}

// servedPrefixSeenBy serves a fresh 40-block prompt at at's gateway,
// checks at served it, waits until from's lane of at holds it, and
// returns a longer prompt that extends it.
func servedPrefixSeenBy(t *testing.T, at, from *dc) []int {
	t.Helper()
	prefix := tokens(1, 40*blockSize)
	if got := complete(t, at, "", prefix); got != at.name {
		t.Fatalf("a fresh prompt at %s's gateway was served by %q", at.name, got)
	}
	hs, _ := routing.BlockHashes(nil, toU32(prefix), blockSize, routing.HashSeed)
	waitLaneSees(t, from, at, hs)
	longer := append(append([]int(nil), prefix...), tokens(2, 4*blockSize)...)
	waitChooses(t, from, at, longer)
	return longer
}

// waitChooses waits until from's gateway would send toks to peer, as
// POST /v1/route/explain says: the lane has the prefix and is eligible,
// and the load peer last published (which may still count the prompt
// that stored the prefix as queued prefill) no longer outweighs it.
func waitChooses(t *testing.T, from, peer *dc, toks []int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": toks})
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := from.client.Post(from.url+"/v1/route/explain", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ex struct {
			DC     string `json:"dc"`
			Remote bool   `json:"remote"`
		}
		if json.Unmarshal(b, &ex) == nil && ex.Remote && ex.DC == peer.name {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's gateway still does not choose %s: %s", from.name, peer.name, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLaneSees waits until from's relay sees, in its summary lane of
// peer, all but the last of the blocks hs.
func waitLaneSees(t *testing.T, from, peer *dc, hs []routing.SeqHash) {
	t.Helper()
	waitFor(t, 10*time.Second, from.name+"'s lane to see "+peer.name+"'s prefix", func() bool {
		for _, r := range from.relay.Consumer().Query(nil, poolDomain(), hs, time.Now()) {
			if r.Pool.DC == peer.name && r.Ready && r.Depth >= len(hs)-1 {
				return true
			}
		}
		return false
	})
}

func toU32(in []int) []uint32 {
	out := make([]uint32, len(in))
	for i, v := range in {
		out[i] = uint32(v)
	}
	return out
}

func poolDomain() producer.Domain {
	return producer.Domain{Model: mocker.DefaultModel, BlockSize: blockSize, HashScheme: producer.HashSchemeXXH3Chain,
		HashSeed: routing.HashSeed}
}

// failingStart returns the config of a relay in a DC with NATS and no
// node, and an address that is taken, for the caller to give the relay
// one of its listeners.
func failingStart(t *testing.T) (service.Config, string) {
	t.Helper()
	bus, err := natsbus.Open(natsbus.Config{URL: natsbus.Embedded, EmbeddedAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Close() })
	return service.Config{DC: "a", NATS: bus.URL(), Nodes: []string{"http://127.0.0.1:1"},
		ClusterAPIs: []string{"127.0.0.1:1"}, GatewayAddr: "127.0.0.1:0", PublishAddr: "127.0.0.1:0",
		Pools: []gateway.Pool{{Model: mocker.DefaultModel, BlockSize: blockSize}}, Log: testLog()}, taken.Addr().String()
}

// TestWaitReadyReturnsWhenRunFails checks that a relay that cannot start
// (its publication address is taken) ends WaitReady with Run's error
// instead of leaving it waiting.
func TestWaitReadyReturnsWhenRunFails(t *testing.T) {
	cfg, taken := failingStart(t)
	cfg.PublishAddr = taken
	r, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.WaitReady(ctx); !errors.Is(err, service.ErrStoppedBeforeReady) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("WaitReady: %v, want ErrStoppedBeforeReady carrying the bind error", err)
	}
	if err := <-runErr; err == nil {
		t.Fatal("Run succeeded on a taken address")
	}
}

// TestFailedStartStopsWhatItStarted checks that a relay whose start fails
// after it began following its peers (its admin address is taken) stops
// those lanes, its publication server and its connections before Run
// returns, instead of leaving them running in the process.
func TestFailedStartStopsWhatItStarted(t *testing.T) {
	cfg, taken := failingStart(t)
	before := goleak.IgnoreCurrent()
	cfg.Peers = []service.Peer{{DC: "b", PublishAddr: freeAddr(t), GatewayURL: "http://" + freeAddr(t)}}
	cfg.Edge.AdminAddr = taken
	r, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Run: %v, want the admin listener's bind error", err)
	}
	if n := len(r.Consumer().Lanes(time.Now())); n == 0 {
		t.Fatal("the relay added no lane before failing: the test no longer covers a failure after them")
	}
	goleak.VerifyNone(t, before)
}
