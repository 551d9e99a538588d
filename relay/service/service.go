package service

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/secure"
	"github.com/kvrouter/kvrouter/internal/telemetry"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/consumer"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/follow"
	"github.com/kvrouter/kvrouter/relay/gateway"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/tokenize"
)

// Errors of the package.
var (
	// ErrConfig is returned for an invalid configuration; the message
	// names the key.
	ErrConfig = errors.New("relay: invalid config")
	// ErrStoppedBeforeReady is returned by WaitReady when Run returned
	// before the relay was ready.
	ErrStoppedBeforeReady = errors.New("relay: stopped before it was ready")
)

// DefaultSummaryCapacity is the blocks a pool's summary holds before it
// grows: a million blocks, a 2 MiB cuckoo filter (the producer doubles it
// when it fills, at the cost of a new epoch and a full snapshot to every
// subscriber).
const DefaultSummaryCapacity = 1 << 20

// DefaultSessionCapacity is the sessions the DC's session summary holds
// before it grows: 65,536 bound sessions in a 128 KiB cuckoo filter,
// doubled (a new epoch, one snapshot per subscriber) when it fills.
const DefaultSessionCapacity = 1 << 16

// Peer is another DC's relay: where it publishes its summaries and where
// its gateway takes forwarded requests, and the WAN round trip to it. A
// DC with several relays listed one by one has one Peer per relay, with
// the same WANRTT (see peers.go).
type Peer struct {
	DC          string
	PublishAddr string
	GatewayURL  string
	WANRTT      time.Duration
}

// Config configures a relay.
type Config struct {
	// DC is this relay's DC (dc); Name names it to peers (name).
	DC, Name string
	// NATS is the DC's NATS URL (nats); the relay learns the engines'
	// cards there, to tell which pool a block belongs to.
	NATS string
	// NATSAuth (nats_creds, nats_nkey_seed, nats_user, nats_password,
	// nats_token, nats_tls_*) authenticates to the DC's NATS server.
	NATSAuth natsbus.ClientAuth
	// Tokenizers gives models their tokenizer (tokenizer), so that the
	// gateway searches text prompts by the engines' token blocks.
	Tokenizers map[string]*tokenize.Tokenizer
	// Nodes are the DC's router nodes' client URLs (nodes): the gateway's
	// local service.
	Nodes []string
	// ClusterAPIs are the same nodes' cluster API addresses
	// (cluster_apis): the ownership change stream.
	ClusterAPIs []string
	// GatewayAddr is the OpenAI-compatible ingress (gateway_addr);
	// PublishAddr the summary publication gRPC address (publish_addr).
	GatewayAddr, PublishAddr string
	// Peers are the other DCs' relays (peers).
	Peers []Peer
	// Pools are the (model, block size) pools summarised and searched.
	Pools []gateway.Pool
	// Policy is the gateway's DC decision policy.
	Policy gateway.Policy
	// Producer configures the summaries (filter kind and capacity).
	Producer producer.Config
	// HeartbeatInterval is how often summaries carry the pools' load to
	// subscribers (default 1 s).
	HeartbeatInterval time.Duration
	// LivenessTimeout is how long an engine's heartbeats may stop before
	// the relay leaves it out of its pools' load and engine count (zero:
	// fleet.DefaultLivenessTimeout, the router nodes' default). The relay
	// command leaves the default; a program that runs its nodes with
	// another liveness timeout (the demo) sets theirs here, so that the
	// relay and the nodes agree on which engines the DC has.
	LivenessTimeout time.Duration
	// ClusterTLS (cluster_tls_cert, cluster_tls_key, cluster_tls_ca) is
	// the mutual TLS of the DC's cluster API, for router nodes that run
	// with --cluster-tls-*: the relay presents this certificate when it
	// follows their ownership stream. Empty: plaintext.
	ClusterTLS mtls.Files
	// WANTLS (wan_tls_cert, wan_tls_key, wan_tls_ca) turns on mutual TLS
	// for the summary publication between DCs: this relay's publication
	// service requires a certificate signed by the CA from every
	// subscriber, and the relay presents its own when it subscribes to its
	// peers. Every relay of a federation uses the same CA. Empty:
	// plaintext.
	WANTLS mtls.Files
	// GatewayTLSCert and GatewayTLSKey (gateway_tls_cert,
	// gateway_tls_key) serve the gateway over HTTPS, to clients and to
	// the peers' gateways that forward here (whose Peer.GatewayURL then
	// starts with https://). Outgoing https requests to peers trust the
	// WANTLS CA when it is set, else the system's roots, and present the
	// WANTLS certificate. Empty: plain HTTP.
	GatewayTLSCert, GatewayTLSKey string
	// Edge is who may call the gateway, its admin listener and its
	// session keys (edge.go).
	Edge gateway.EdgeConfig
	// Insecure (insecure) lets the publication and gateway listeners run
	// on non-loopback addresses without TLS, with a warning at start;
	// without it New refuses such a configuration.
	Insecure bool
	Log      *slog.Logger
	// OTLPEndpoint (otlp_endpoint) exports the gateway's spans to this
	// collector (telemetry.ParseEndpoint); empty leaves tracing to the
	// OTEL_* environment, and off without it.
	OTLPEndpoint string
}

// Validate checks the configuration; errors name the key.
func (c *Config) Validate() error {
	switch {
	case c.DC == "":
		return fmt.Errorf("%w: dc is required", ErrConfig)
	case len(c.Nodes) == 0:
		return fmt.Errorf("%w: nodes: the DC's router node URLs are required", ErrConfig)
	case len(c.ClusterAPIs) == 0:
		return fmt.Errorf("%w: cluster_apis: the DC's router nodes' cluster API addresses are required", ErrConfig)
	case len(c.Pools) == 0:
		return fmt.Errorf("%w: pools: at least one model:block_size", ErrConfig)
	case c.LivenessTimeout < 0:
		return fmt.Errorf("%w: liveness_timeout %v must not be negative", ErrConfig, c.LivenessTimeout)
	}
	for _, a := range []struct{ key, addr string }{{"gateway_addr", c.GatewayAddr}, {"publish_addr", c.PublishAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("%w: %s %q: %v", ErrConfig, a.key, a.addr, err)
		}
	}
	for _, p := range c.Peers {
		// A DC may repeat, once per relay (peers.go), but not be this one.
		if p.DC == "" || p.DC == c.DC {
			return fmt.Errorf("%w: peers: DC %q empty or this relay's own", ErrConfig, p.DC)
		}
		if _, _, err := net.SplitHostPort(p.PublishAddr); err != nil {
			return fmt.Errorf("%w: peers: %s publish address %q: %v", ErrConfig, p.DC, p.PublishAddr, err)
		}
		if u, err := url.Parse(p.GatewayURL); err != nil || u.Host == "" {
			return fmt.Errorf("%w: peers: %s gateway URL %q", ErrConfig, p.DC, p.GatewayURL)
		}
	}
	if err := checkRTTs(c.Peers); err != nil {
		return err
	}
	for _, p := range c.Pools {
		if p.Model == "" || p.BlockSize <= 0 {
			return fmt.Errorf("%w: pools: %q:%d", ErrConfig, p.Model, p.BlockSize)
		}
	}
	if err := c.ClusterTLS.Check("cluster_tls"); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.WANTLS.Check("wan_tls"); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if (c.GatewayTLSCert == "") != (c.GatewayTLSKey == "") {
		return fmt.Errorf("%w: gateway_tls_cert and gateway_tls_key go together", ErrConfig)
	}
	return nil
}

// loadTLS loads one link's mutual TLS; nil configurations when its files
// are unset (plaintext). The certificate is reloaded when its files
// change, and every reload is logged.
func loadTLS(prefix string, f mtls.Files, log *slog.Logger) (server, client *tls.Config, err error) {
	if !f.Enabled() {
		return nil, nil, nil
	}
	if server, client, err = mtls.LoadReloading(prefix, f, mtls.LogReloads(log, prefix)); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return server, client, nil
}

// grpcCreds turns a TLS configuration into gRPC credentials, plaintext
// for nil.
func grpcCreds(cfg *tls.Config) credentials.TransportCredentials {
	if cfg == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(cfg)
}

// Relay is one DC's relay: ownership stream → per-pool producers →
// publication to peers; peers' summaries → consumer lanes; and the
// gateway that decides, per request, which DC serves it.
type Relay struct {
	cfg       Config
	log       *slog.Logger
	producers map[string]*producer.Producer // by model
	// sessions is the DC's session summary (producer.SessionDomain).
	sessions *producer.Producer
	pub      *publish.Server
	// wanServer and wanClient are the credentials of the publication
	// service and of the subscriptions to peers.
	wanServer, wanClient credentials.TransportCredentials
	// gwTLS serves the gateway over HTTPS when set; upstream carries the
	// gateway's requests to nodes and peers (and the session lookups).
	gwTLS    *tls.Config
	certs    *mtls.Reloader
	upstream *http.Transport
	cons     *consumer.Consumer
	gw       *gateway.Gateway
	src      *follow.Source

	gatewayAddr atomic.Pointer[string]
	ready       chan struct{}
	// ended is closed when Run returns, runErr holding its error.
	ended    chan struct{}
	runErr   error
	unmapped atomic.Uint64
	// sec counts refused subscriptions; served on the gateway's /metrics.
	sec *metrics.Security
	// load is the local DC's load over every pool, refreshed by loads
	// every HeartbeatInterval; the gateway reads it per request.
	load atomic.Pointer[producer.Load]
	// tracing exports the gateway's spans; Run shuts it down.
	tracing *telemetry.Tracing
}

// New validates cfg and builds the relay's parts; Run starts them.
func New(cfg Config) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := secure.Check(cfg.listeners(), cfg.Insecure, cfg.Log); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, time.Second)
	cfg.Name = cmp.Or(cfg.Name, "relay-"+cfg.DC)
	cfg.Producer.Filter.Capacity = cmp.Or(cfg.Producer.Filter.Capacity, DefaultSummaryCapacity)
	cfg.Producer.Filter.Kind = cmp.Or(cfg.Producer.Filter.Kind, filter.KindCuckoo)
	r := &Relay{cfg: cfg, log: cfg.Log.With("dc", cfg.DC, "relay", cfg.Name), producers: map[string]*producer.Producer{},
		ready: make(chan struct{}), ended: make(chan struct{})}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x72656c6179))
	for _, p := range cfg.Pools {
		pr, err := producer.New(poolID(cfg.DC, p), cfg.Producer, rng)
		if err != nil {
			return nil, fmt.Errorf("%w: pool %s: %w", ErrConfig, p.Model, err)
		}
		r.producers[p.Model] = pr
	}
	scfg := cfg.Producer
	scfg.Filter.Capacity = DefaultSessionCapacity
	if !scfg.Filter.Kind.IsCuckoo() {
		// Sessions end all the time; a Bloom summary would claim every
		// ended session until its next rebuild, so the session summary
		// stays a cuckoo filter, which deletes.
		scfg.Filter.Kind = filter.KindCuckoo
	}
	var err error
	if r.sessions, err = producer.New(producer.SessionPool(cfg.DC), scfg, rng); err != nil {
		return nil, fmt.Errorf("%w: session summary: %w", ErrConfig, err)
	}
	if r.pub, err = publish.NewServer(publish.ServerConfig{}); err != nil {
		return nil, err
	}
	for _, pr := range r.producers {
		r.pub.Register(pr)
	}
	r.pub.Register(r.sessions)
	if r.cons, err = consumer.New(consumer.Config{SubscriberID: cfg.Name, Now: time.Now}); err != nil {
		return nil, err
	}
	_, clusterTLS, err := loadTLS("cluster_tls", cfg.ClusterTLS, r.log)
	if err != nil {
		return nil, err
	}
	if clusterTLS, err = clusterLink(&cfg, clusterTLS); err != nil {
		return nil, err
	}
	// The WAN client configuration also verifies peers' gateways served
	// over HTTPS (whose certificates need carry no identity).
	wanServer, wanClient, err := loadTLS("wan_tls", cfg.WANTLS, r.log)
	if err != nil {
		return nil, err
	}
	r.sec = metrics.NewSecurity(nil)
	pubServer, subClient, err := wanLinks(&cfg, wanServer, wanClient, r.sec)
	if err != nil {
		return nil, err
	}
	r.wanServer, r.wanClient = grpcCreds(pubServer), grpcCreds(subClient)
	if r.gwTLS, r.certs, err = gatewayTLS(&r.cfg); err != nil {
		return nil, err
	}
	r.upstream = gateway.NewTransport(wanClient)
	if r.src, err = follow.New(follow.Config{Addrs: cfg.ClusterAPIs,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(grpcCreds(clusterTLS))}, Logger: r.log}, rng); err != nil {
		return nil, err
	}
	if r.tracing, err = r.setupTracing(); err != nil {
		return nil, err
	}
	if err := r.buildGateway(); err != nil {
		_ = r.tracing.Shutdown()
		return nil, err
	}
	return r, nil
}

// poolID names a pool of this relay's DC. Pools hash with the routing
// core's base seed (no LoRA, no cache salt).
func poolID(dc string, p gateway.Pool) producer.PoolID {
	return producer.PoolID{DC: dc, Domain: producer.Domain{Model: p.Model, BlockSize: uint32(p.BlockSize),
		HashScheme: producer.HashSchemeXXH3Chain, HashSeed: routing.HashSeed}}
}

func (r *Relay) buildGateway() error {
	cfg := r.cfg
	peers := groupPeers(cfg.Peers)
	remotes := make([]gateway.Remote, 0, len(peers))
	dcs := []string{cfg.DC}
	for _, p := range peers {
		remotes = append(remotes, p.remote())
		dcs = append(dcs, p.DC)
	}
	local := gateway.RefsIndex{}
	for m, p := range r.producers {
		local[m] = p
	}
	homes := gateway.NewHomes(dcs...)
	lookups := &http.Client{Transport: gateway.NodeAuth(r.upstream, cfg.Edge.UpstreamToken)}
	loc, err := gateway.NewSummaryLocator(gateway.SummaryLocatorConfig{Remotes: remotes, Homes: homes, Index: r.cons,
		Confirm: gateway.NewHTTPLocator(remotes, homes, lookups, time.Now, 0, 0), MaxStaleness: cfg.Policy.MaxStaleness,
		Now: time.Now})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	gw, err := gateway.New(gateway.Config{DC: cfg.DC, Nodes: cfg.Nodes, Remotes: remotes, Pools: cfg.Pools,
		Policy: cfg.Policy, LocalIndex: local, RemoteIndex: r.cons, Sessions: loc, LocalLoad: r.localLoad,
		Tokenizers: cfg.Tokenizers, Transport: r.upstream, Now: time.Now, Log: r.log, Edge: cfg.Edge,
		TracerProvider: r.tracing.Provider, MetricLabels: prometheus.Labels{"dc": cfg.DC, "relay": cfg.Name}})
	if err != nil {
		return err
	}
	r.watchCerts(gw)
	loc.SetMetrics(gw.Metrics())
	gw.Metrics().Registry.MustRegister(newLaneCollector(r.cons.Lanes), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "kvrouter_relay_unmapped_changes_total",
		Help: "Stored-block changes of the DC's ownership stream dropped because their engine's pool was not known yet (its card had not arrived); the stream's next snapshot repairs the summary.",
	}, func() float64 { return float64(r.unmapped.Load()) }))
	r.gw = gw
	r.sec.Register(gw.Metrics().Registerer())
	return nil
}

// localLoad is the local DC's load, for the gateway's load penalty: the
// remote DCs' loads arrive with their summaries, and weighing only theirs
// would favour the local DC whatever its load. It is the figure loads
// last computed, so the request path does no registry work.
func (r *Relay) localLoad() producer.Load {
	if l := r.load.Load(); l != nil {
		return *l
	}
	return producer.Load{}
}

// Gateway returns the relay's gateway (metrics, homes).
func (r *Relay) Gateway() *gateway.Gateway { return r.gw }

// Consumer returns the relay's view of the peers' summaries.
func (r *Relay) Consumer() *consumer.Consumer { return r.cons }

// GatewayAddr is the gateway's listen address once WaitReady returned.
func (r *Relay) GatewayAddr() string { return *r.gatewayAddr.Load() }

// WaitReady blocks until the relay listens, Run returns first (the error
// says why the relay never became ready), or ctx ends.
func (r *Relay) WaitReady(ctx context.Context) error {
	select {
	case <-r.ready:
		return nil
	case <-r.ended:
		select {
		case <-r.ready:
			return nil
		default:
		}
		return fmt.Errorf("%w: %w", ErrStoppedBeforeReady, cmp.Or(r.runErr, context.Canceled))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run starts the parts, serves until ctx ends and stops them. A Relay
// runs once.
func (r *Relay) Run(ctx context.Context) (err error) {
	defer func() {
		r.runErr = err
		close(r.ended)
	}()
	return r.run(ctx)
}

// run is Run's body.
func (r *Relay) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	plane, closeBus, err := r.openRegistry(ctx)
	if err != nil {
		return err
	}
	defer closeBus()
	defer plane.Close()

	pubLn, err := net.Listen("tcp", r.cfg.PublishAddr)
	if err != nil {
		return fmt.Errorf("publish_addr %s: %w", r.cfg.PublishAddr, err)
	}
	gs := grpc.NewServer(publish.ServerOptions(r.wanServer)...)
	kvrpb.RegisterRelayServer(gs, r.pub)
	gwLn, err := net.Listen("tcp", r.cfg.GatewayAddr)
	if err != nil {
		_ = pubLn.Close()
		return fmt.Errorf("gateway_addr %s: %w", r.cfg.GatewayAddr, err)
	}
	ga, pa := gwLn.Addr().String(), pubLn.Addr().String()
	if r.gwTLS != nil {
		gwLn = tls.NewListener(gwLn, r.gwTLS)
	}
	r.gatewayAddr.Store(&ga)

	var wg sync.WaitGroup
	wg.Go(func() { _ = gs.Serve(pubLn) })
	wg.Go(func() { r.pub.Run(ctx, r.cfg.HeartbeatInterval) })
	wg.Go(func() { r.feed(ctx, plane.Registry()) })
	wg.Go(func() { r.loads(ctx, plane.Registry()) })
	// A start that fails part way stops what it started, as a stop does:
	// the lanes already added keep following their peers until closed.
	conns, err := r.addLanes()
	defer func() {
		cancel()
		_ = r.src.Close()
		r.cons.Close()
		gs.Stop()
		for _, p := range r.producers {
			p.Close()
		}
		r.sessions.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
		r.upstream.CloseIdleConnections()
		if terr := r.tracing.Shutdown(); terr != nil {
			r.log.Warn("flushing spans", "err", terr)
		}
	}()
	waitAdmin := func() {}
	if err == nil {
		waitAdmin, err = r.serveAdmin(ctx)
	}
	if err != nil {
		_ = gwLn.Close()
		return err
	}
	close(r.ready)
	r.log.Info("relay serving", "gateway", ga, "publish", pa, "peers", len(r.cfg.Peers), "pools", len(r.cfg.Pools))
	err = r.gw.Serve(ctx, gwLn)
	cancel()
	waitAdmin()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// openRegistry follows the DC's engine cards (no KV events) to learn each
// engine's pool and load.
func (r *Relay) openRegistry(ctx context.Context) (*fleet.Plane, func(), error) {
	bus, err := natsbus.Open(natsbus.Config{URL: r.cfg.NATS, Name: r.cfg.Name, Auth: r.cfg.NATSAuth}, r.log)
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	plane, err := fleet.New(fleet.Config{DC: r.cfg.DC, NoKVEvents: true, LivenessTimeout: r.cfg.LivenessTimeout}, bus.Conn, nil, nil, r.log)
	if err != nil {
		bus.Close()
		return nil, nil, err
	}
	if err := plane.Start(ctx); err != nil {
		bus.Close()
		return nil, nil, err
	}
	return plane, bus.Close, nil
}

// addLanes subscribes to every peer's summary of every pool and to its
// session summary.
func (r *Relay) addLanes() ([]*grpc.ClientConn, error) {
	var conns []*grpc.ClientConn
	for _, p := range groupPeers(r.cfg.Peers) {
		cc, err := r.dialPeer(p)
		if err != nil {
			return conns, fmt.Errorf("peers: %s: %w", p.DC, err)
		}
		conns = append(conns, cc)
		for _, pool := range r.cfg.Pools {
			if _, err := r.cons.AddLane(poolID(p.DC, pool), kvrpb.NewRelayClient(cc)); err != nil {
				return conns, err
			}
		}
		// A peer that publishes no session summary leaves this lane
		// without a snapshot; its sessions are then always looked up.
		if _, err := r.cons.AddLane(producer.SessionPool(p.DC), kvrpb.NewRelayClient(cc)); err != nil {
			return conns, err
		}
	}
	return conns, nil
}
