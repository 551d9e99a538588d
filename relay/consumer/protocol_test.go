package consumer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
	"github.com/kvrouter/kvrouter/routing"
)

// churn applies n batches storing and removing blocks on two ranks.
func churn(t testing.TB, p *producer.Producer, rng *mrand.Rand, n int) {
	t.Helper()
	for range n {
		hs := chain(rng, 8)
		if err := p.Apply(storeBatch(1, hs...)); err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(storeBatch(2, hs[:4]...)); err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(removeBatch(1, hs[4:]...)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLaneConvergesAndAnswersQueries(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 1))
	p := newProducer(t, poolIn("dc-b"), 1<<12, 1, 256)
	churn(t, p, rng, 20)
	s := startServer(t, nil, nil, nil, nil)
	s.srv.Register(p)
	c := newConsumer(t, nil)
	l, err := c.AddLane(poolIn("dc-b"), s.client)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddLane(poolIn("dc-b"), s.client); !errors.Is(err, ErrDuplicateLane) {
		t.Fatalf("duplicate lane: %v", err)
	}
	waitConverged(t, l, p)
	req := chain(rng, 64)
	_ = p.Apply(storeBatch(3, req[:40]...))
	churn(t, p, rng, 5)
	p.SetLoad(producer.Load{Engines: 8})
	s.srv.Beat(time.Now())
	waitConverged(t, l, p)
	res := c.Query(nil, domain, req, time.Now())
	if len(res) != 1 || !res[0].Ready || res[0].Depth != 40 {
		t.Fatalf("query %+v, want depth 40", res)
	}
	if got := c.Query(nil, producer.Domain{Model: "other"}, req, time.Now()); len(got) != 0 {
		t.Fatalf("other domain answered %+v", got)
	}
}

func TestLaneRecoversFromMissedDelta(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(2, 1))
	p := newProducer(t, poolIn("dc-b"), 1<<12, 2, 256)
	s := startServer(t, nil, nil, nil, nil)
	s.srv.Register(p)
	c := newConsumer(t, nil)
	l, _ := c.AddLane(poolIn("dc-b"), s.client)
	waitConverged(t, l, p)
	_, seq := p.Epoch()
	s.faults.dropSeq.Store(seq + 3)
	churn(t, p, rng, 5)
	waitConverged(t, l, p)
	st := l.Status(time.Now())
	if st.Snapshots < 2 || !errors.Is(st.LastErr, publish.ErrGap) {
		t.Fatalf("status %+v: want a gap and a second snapshot", st)
	}
}

func TestLaneRecoversFromLag(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(3, 1))
	p := newProducer(t, poolIn("dc-b"), 1<<12, 3, 4)
	s := startServer(t, nil, nil, nil, nil)
	s.srv.Register(p)
	c := newConsumer(t, nil)
	l, _ := c.AddLane(poolIn("dc-b"), s.client)
	waitConverged(t, l, p)
	release := s.faults.hold()
	churn(t, p, rng, 10) // 30 deltas into a queue of 4
	release()
	waitConverged(t, l, p)
	st := l.Status(time.Now())
	if !errors.Is(st.LastErr, publish.ErrLagged) || p.Stats().Lagged == 0 {
		t.Fatalf("status %+v, producer %+v: want a lag", st, p.Stats())
	}
}

func TestLaneFollowsProducerRestart(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(4, 1))
	p := newProducer(t, poolIn("dc-b"), 1<<12, 4, 256)
	churn(t, p, rng, 5)
	s := startServer(t, nil, nil, nil, nil)
	s.srv.Register(p)
	c := newConsumer(t, nil)
	l, _ := c.AddLane(poolIn("dc-b"), s.client)
	waitConverged(t, l, p)
	old := l.Status(time.Now()).Epoch
	q := newProducer(t, poolIn("dc-b"), 1<<12, 5, 256)
	churn(t, q, rng, 3)
	s.srv.Register(q)
	waitConverged(t, l, q)
	st := l.Status(time.Now())
	if st.Epoch == old || !errors.Is(st.LastErr, publish.ErrProducerChanged) {
		t.Fatalf("status %+v after restart (old epoch %#x)", st, old)
	}
	// A rebuild of the new producer is another epoch change.
	if err := q.Rebuild(1 << 13); err != nil {
		t.Fatal(err)
	}
	churn(t, q, rng, 2)
	waitConverged(t, l, q)
}

func TestLaneOverTCPWithTLS(t *testing.T) {
	serverCreds, clientCreds := selfSigned(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rng := mrand.New(mrand.NewPCG(5, 1))
	p := newProducer(t, poolIn("dc-c"), 1<<14, 6, 256)
	churn(t, p, rng, 50)
	s := startServer(t, lis, serverCreds, clientCreds, nil)
	s.srv.Register(p)
	c := newConsumer(t, nil)
	l, _ := c.AddLane(poolIn("dc-c"), s.client)
	waitConverged(t, l, p)
	churn(t, p, rng, 20)
	waitConverged(t, l, p)
	c.RemoveLane(poolIn("dc-c"))
	if got := c.Query(nil, domain, chain(rng, 4), time.Now()); len(got) != 0 {
		t.Fatalf("removed lane answered %+v", got)
	}
}

// selfSigned returns TLS credentials for a server certificate valid for
// 127.0.0.1 and client credentials trusting it.
func selfSigned(t testing.TB) (server, client credentials.TransportCredentials) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relay"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Unix(0, 0), NotAfter: time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS13})
	client = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	return server, client
}

// TestProtocolCompactSummaries runs the protocol tests on semi-sorted
// (compact) summaries: snapshots, deltas of 6-byte bucket images, gap,
// lag and restart recovery must all end in the producer's filter.
func TestProtocolCompactSummaries(t *testing.T) {
	testKind = filter.KindCuckooCompact
	defer func() { testKind = filter.KindCuckoo }()
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{name: "converges", run: TestLaneConvergesAndAnswersQueries},
		{name: "missed delta", run: TestLaneRecoversFromMissedDelta},
		{name: "lag", run: TestLaneRecoversFromLag},
		{name: "producer restart", run: TestLaneFollowsProducerRestart},
	} {
		t.Run(tc.name, tc.run)
	}
}

// TestBestFollowsLanes: over the publication protocol, Best answers what
// BestOf over Query does while lanes follow snapshots, deltas, a
// resubscription after a gap, a pool that grows into a larger filter and
// a lane's removal.
func TestBestFollowsLanes(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(8, 1))
	s := startServer(t, nil, nil, nil, nil)
	c := newConsumer(t, nil)
	req := chain(rng, 64)
	var lanes []*Lane
	ps := newProducers(t, s, c, &lanes, "dc-b", "dc-c", "dc-d")
	for k, p := range ps {
		_ = p.Apply(storeBatch(1, req[:20*(k+1)]...))
		churn(t, p, rng, 3)
	}
	converged := func() {
		for k, l := range lanes {
			if l != nil {
				waitConverged(t, l, ps[k])
			}
		}
	}
	converged()
	checkBest(t, c, req, "dc-d", 60)

	// A gap on dc-c's stream: it resubscribes with a fresh snapshot.
	_, seq := ps[1].Epoch()
	s.faults.dropSeq.Store(seq + 2)
	churn(t, ps[1], rng, 4)
	converged()
	if l := lanes[1].Status(time.Now()); l.Snapshots < 2 {
		t.Fatalf("dc-c status %+v: want a second snapshot", l)
	}
	checkBest(t, c, req, "dc-d", 60)

	// dc-d's pool grows into a filter of twice the buckets.
	if err := ps[2].Rebuild(1 << 18); err != nil {
		t.Fatal(err)
	}
	churn(t, ps[2], rng, 2)
	converged()
	checkBest(t, c, req, "dc-d", 60)

	c.RemoveLane(poolIn("dc-d"))
	lanes[2] = nil
	checkBest(t, c, req, "dc-c", 40)
}

// checkBest fails t unless Best over c's lanes answers what BestOf over
// Query does for hs, which is dc at depth.
func checkBest(t *testing.T, c *Consumer, hs []routing.SeqHash, dc string, depth int) {
	t.Helper()
	now := time.Now()
	got, _, ok := c.Best(domain, hs, now, flat, 0)
	want, _, _ := BestOf(c.Query(nil, domain, hs, now), flat, 0)
	if !ok || got.Pool != want.Pool || got.Depth != want.Depth || got.Pool.DC != dc || got.Depth != depth {
		t.Fatalf("Best = %v %+v, BestOf(Query) = %+v, want %s at %d", ok, got, want, dc, depth)
	}
}

// newProducers registers a producer per DC on s and adds its lane to c.
func newProducers(t *testing.T, s *server, c *Consumer, lanes *[]*Lane, dcs ...string) []*producer.Producer {
	t.Helper()
	var out []*producer.Producer
	for k, dc := range dcs {
		p := newProducer(t, poolIn(dc), 1<<17, uint64(20+k), 256)
		s.srv.Register(p)
		l, err := c.AddLane(poolIn(dc), s.client)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
		*lanes = append(*lanes, l)
	}
	return out
}
