package service

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/kvrouter/kvrouter/relay/gateway"
	"github.com/kvrouter/kvrouter/relay/publish"
)

// A peer DC may run several relays (no single point of failure per DC).
// Behind one Service they are one Peer entry; listed one by one, the DC
// appears in several Peer entries, one per relay, and peerDC groups them:
// the lanes subscribe to any one of the relays and move to another when
// it fails (each relay follows the same ownership stream, so any one
// publishes the DC's summaries; a move is a change of publisher identity,
// which the protocol answers with a fresh snapshot), and the gateway
// forwards to any one of their gateways.

// peerDC is one peer DC with every relay listed for it.
type peerDC struct {
	DC       string
	Publish  []string
	Gateways []string
	WANRTT   time.Duration
}

// groupPeers groups cfg's peers by DC, in order of first appearance; the
// first entry of a DC gives its round trip.
func groupPeers(peers []Peer) []peerDC {
	var out []peerDC
	at := map[string]int{}
	for _, p := range peers {
		i, ok := at[p.DC]
		if !ok {
			i = len(out)
			at[p.DC] = i
			out = append(out, peerDC{DC: p.DC, WANRTT: p.WANRTT})
		}
		g := &out[i]
		if !slices.Contains(g.Publish, p.PublishAddr) {
			g.Publish = append(g.Publish, p.PublishAddr)
		}
		if !slices.Contains(g.Gateways, p.GatewayURL) {
			g.Gateways = append(g.Gateways, p.GatewayURL)
		}
	}
	return out
}

// remote is the gateway's view of the peer DC.
func (p peerDC) remote() gateway.Remote {
	return gateway.Remote{DC: p.DC, URL: p.Gateways[0], Alternates: p.Gateways[1:], WANRTT: p.WANRTT}
}

// checkRTTs refuses a DC listed with two round trips: they describe one
// WAN path, and which one wins would depend on the order.
func checkRTTs(peers []Peer) error {
	rtt := map[string]Peer{}
	for _, p := range peers {
		if q, ok := rtt[p.DC]; ok && q.WANRTT != p.WANRTT {
			return fmt.Errorf("%w: peers: DC %s listed with wan_rtt %v and %v", ErrConfig, p.DC, q.WANRTT, p.WANRTT)
		}
		rtt[p.DC] = p
	}
	return nil
}

// balancedConfig spreads the lanes' subscriptions over the DC's relays
// that are up: round_robin keeps a connection to each and skips those
// down, so a lane whose relay died resubscribes to another at once.
const balancedConfig = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// dialPeer opens one client connection to every publishing relay of a
// peer DC. A single address dials it as before; several go through a
// fixed resolver.
func (r *Relay) dialPeer(p peerDC) (*grpc.ClientConn, error) {
	opts := publish.DialOptions(r.wanClient)
	if len(p.Publish) == 1 {
		return grpc.NewClient(p.Publish[0], opts...)
	}
	res := manual.NewBuilderWithScheme("kvr-peer")
	addrs := make([]resolver.Address, len(p.Publish))
	for i, a := range p.Publish {
		addrs[i] = resolver.Address{Addr: a}
	}
	res.InitialState(resolver.State{Addresses: addrs})
	opts = append(opts, grpc.WithResolvers(res), grpc.WithDefaultServiceConfig(balancedConfig))
	return grpc.NewClient(res.Scheme()+":///relays", opts...)
}
