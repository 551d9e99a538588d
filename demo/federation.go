package demo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kvrouter/kvrouter/internal/freeport"
	"github.com/kvrouter/kvrouter/internal/netem"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/relay/gateway"
	"github.com/kvrouter/kvrouter/relay/service"
	"github.com/kvrouter/kvrouter/sim"
	"github.com/kvrouter/kvrouter/traces"
)

// The federation part of the demo: two DCs with their WAN round trip.
const (
	eastDC, westDC = "dc-east", "dc-west"
	// DefaultWANRTT is the injected round trip between the two DCs.
	DefaultWANRTT = 20 * time.Millisecond
	// crossShare is the share of multi-turn conversations whose later
	// turns arrive at the other DC's gateway.
	crossShare = 3
)

// Federation is two DCs, each a 3-node router cluster with engines and a
// relay, whose relays reach each other through a WAN link proxy.
type Federation struct {
	dcs     [2]*Cluster
	relays  [2]*service.Relay
	links   []*netem.Proxy
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	Gateway [2]string
}

// StartFederation starts both DCs and their relays and waits until both
// gateways serve.
func StartFederation(ctx context.Context, cfg Config, log *slog.Logger) (_ *Federation, err error) {
	f := &Federation{}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	names := [2]string{eastDC, westDC}
	half := cfg
	half.Engines = max(1, cfg.Engines/2)
	for i, dc := range names {
		if f.dcs[i], err = startDC(ctx, half, dc, "", "kv", log); err != nil {
			return nil, err
		}
	}
	var gw, pub [2]string
	for i := range 2 {
		if gw[i], err = freeport.Loopback(); err != nil {
			return nil, err
		}
		if pub[i], err = freeport.Loopback(); err != nil {
			return nil, err
		}
	}
	// East's gateway takes the demo's client address; the WAN proxy
	// needs it before the relay listens, so port 0 gets a free port now.
	if cfg.HTTPAddr != "" && !strings.HasSuffix(cfg.HTTPAddr, ":0") {
		gw[0] = cfg.HTTPAddr
	}
	rctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	for i, dc := range names {
		o := 1 - i
		toPub, err := netem.Listen(pub[o], DefaultWANRTT/2)
		if err != nil {
			return nil, err
		}
		toGW, err := netem.Listen(gw[o], DefaultWANRTT/2)
		if err != nil {
			toPub.Close()
			return nil, err
		}
		f.links = append(f.links, toPub, toGW)
		var nodes, apis []string
		for _, n := range f.dcs[i].Nodes() {
			nodes, apis = append(nodes, n[1]), append(apis, n[2])
		}
		r, err := service.New(service.Config{DC: dc, NATS: f.dcs[i].bus.URL(), Nodes: nodes, ClusterAPIs: apis,
			GatewayAddr: gw[i], PublishAddr: pub[i], LivenessTimeout: engineLiveness,
			Peers: []service.Peer{{DC: names[o], PublishAddr: toPub.Addr(), GatewayURL: "http://" + toGW.Addr(), WANRTT: DefaultWANRTT}},
			Pools: []gateway.Pool{{Model: mocker.DefaultModel, BlockSize: mocker.DefaultBlockSize}},
			Log:   log})
		if err != nil {
			return nil, err
		}
		f.relays[i] = r
		f.wg.Go(func() {
			if err := r.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("relay stopped", "dc", dc, "err", err)
			}
		})
		if err := r.WaitReady(ctx); err != nil {
			return nil, err
		}
		f.Gateway[i] = "http://" + r.GatewayAddr()
	}
	for i := range 2 {
		if err := waitReady(ctx, f.Gateway[i], 30*time.Second); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// waitReady polls a gateway's /ready.
func waitReady(ctx context.Context, base string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: gateway %s not ready within %v", base, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the relays, the links and both DCs.
func (f *Federation) Stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	for _, l := range f.links {
		l.Close()
	}
	for _, c := range f.dcs {
		if c != nil {
			c.Stop()
		}
	}
}

// ingress sends each conversation to its origin DC's gateway, and the
// later turns of one in crossShare multi-turn conversations to the other
// DC's: conversations that continue in another region.
func (f *Federation) ingress(reqs []traces.Request) func(i int, req traces.Request) string {
	turn := map[int]int{}
	turns := make([]int, len(reqs))
	for i, r := range reqs {
		if len(r.HashIDs) > 0 {
			k := int(r.HashIDs[0])
			turns[i] = turn[k]
			turn[k]++
		}
	}
	return func(i int, req traces.Request) string {
		if len(req.HashIDs) == 0 {
			return f.Gateway[i%2]
		}
		h := fnv.New32a()
		fmt.Fprintf(h, "%d", req.HashIDs[0])
		v := h.Sum32()
		origin := int(v % 2)
		if turns[i] > 0 && (v/2)%crossShare == 0 {
			origin = 1 - origin
		}
		return f.Gateway[origin]
	}
}

// RunFederation replays the trace through the two gateways and prints
// the federation report.
func RunFederation(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Federation: two DCs (%s, %s), each a %d-node router cluster with %d engines and a relay;\n",
		eastDC, westDC, ClusterSize, max(1, cfg.Engines/2))
	fmt.Fprintf(out, "WAN round trip %v injected between the relays. Conversations arrive at one DC's gateway; the later\n", DefaultWANRTT)
	fmt.Fprintf(out, "turns of one in %d multi-turn conversations arrive at the other DC's.\n\n", crossShare)
	f, err := StartFederation(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer f.Stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	defer client.CloseIdleConnections()
	r := &Replayer{Target: f.ingress(cfg.Trace), Sessions: true, Model: mocker.DefaultModel, Compress: cfg.Compress, Client: client}
	start := time.Now()
	outs := r.Run(ctx, cfg.Trace)
	if err := ctx.Err(); err != nil {
		return err
	}
	return writeFederation(out, f, outs, time.Since(start))
}

// writeFederation prints one row per ingress DC and one for the whole.
func writeFederation(w io.Writer, f *Federation, outs []Outcome, wall time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ingress\trequests\terrors\tserved locally\tforwarded\thit ratio local\thit ratio forwarded\tTTFT p50 ms\tTTFT p99 ms\t")
	rows := []string{eastDC, westDC, "all"}
	for _, row := range rows {
		var n, errs, local, fwd, pl, cl, pf, cf int
		var ttft []time.Duration
		for _, o := range outs {
			in := dcOf(f, o.Ingress)
			if row != "all" && in != row {
				continue
			}
			n++
			if o.Err != nil {
				errs++
				continue
			}
			ttft = append(ttft, o.TTFT)
			if o.DC == in {
				local++
				pl, cl = pl+o.PromptTokens, cl+o.CachedTokens
			} else {
				fwd++
				pf, cf = pf+o.PromptTokens, cf+o.CachedTokens
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t%.0f\t%.0f\t\n", row, n, errs, local, fwd, ratio(cl, pl), ratio(cf, pf),
			ms(sim.Percentile(ttft, 0.5)), ms(sim.Percentile(ttft, 0.99)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range outs {
		if o.Err != nil {
			fmt.Fprintf(w, "first error (ingress %s): %v\n", dcOf(f, o.Ingress), o.Err)
			break
		}
	}
	sessions, violations := affinityAcross(outs)
	fmt.Fprintf(w, "sessions served at least twice: %d; served by more than one DC or engine (affinity violations): %d; %.1fs wall\n",
		sessions, violations, wall.Seconds())
	return nil
}

func dcOf(f *Federation, gatewayURL string) string {
	if gatewayURL == f.Gateway[1] {
		return westDC
	}
	return eastDC
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// affinityAcross counts the sessions served at least twice and those
// served by more than one (DC, engine).
func affinityAcross(outs []Outcome) (sessions, violations int) {
	byDC := make([]Outcome, len(outs))
	for i, o := range outs {
		o.Worker = o.DC + "/" + o.Worker
		byDC[i] = o
	}
	return affinity(byDC)
}
