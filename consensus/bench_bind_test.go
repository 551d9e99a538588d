package consensus

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/store"
)

// BenchmarkBindCommit measures a bind's commit latency, proposed on the
// leader of a 3-node cluster, with 1 and 64 concurrent clients; p50 and
// p99 are reported in microseconds. tcp-pebble is the deployed shape:
// raft's TCP transport on loopback and a Pebble raft log on the real disk
// that syncs every append; tcp-mem keeps TCP with raft's in-memory log,
// isolating the fsync; inmem is raft's in-memory transport and log.
func BenchmarkBindCommit(b *testing.B) {
	setups := []struct {
		name  string
		start func(b *testing.B) *Node
	}{
		{"tcp-pebble", func(b *testing.B) *Node { return newTCPCluster(b, 3, true, tcpTransport) }},
		{"tcp-mem", func(b *testing.B) *Node { return newTCPCluster(b, 3, false, tcpTransport) }},
		{"inmem", func(b *testing.B) *Node {
			c := newClusterWith(b, 3, benchConfig)
			return c.nodes[c.leader()]
		}},
	}
	for _, s := range setups {
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", s.name, clients), func(b *testing.B) {
				benchBinds(b, s.start(b), clients)
			})
		}
	}
}

// benchBinds binds new keys on leader from clients goroutines.
func benchBinds(b *testing.B, leader *Node, clients int) {
	var seq atomic.Uint64
	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism(max(1, clients/maxProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			k := seq.Add(1)
			start := time.Now()
			cmd := bindCmd(fmt.Sprintf("k%d", k), k, 0, 0, "")
			cmd.MaxSessions = 1 << 30
			r, err := leader.Apply(context.Background(), cmd)
			if err != nil || !r.Won {
				b.Errorf("bind: %v %v", r, err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	reportQuantiles(b, lat)
}

// tcpTransport is raft's plain TCP transport on a loopback port.
func tcpTransport(b *testing.B, _ string) *raft.NetworkTransport {
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	return tr
}

// newTCPCluster starts n nodes over the transports mk makes (given each
// node's id) on loopback, with Pebble raft logs in a temporary directory
// when pebble is set, and returns the ready leader. Cleanup shuts every
// raft down before closing the transports and stores.
func newTCPCluster(b *testing.B, n int, pebble bool, mk func(b *testing.B, id string) *raft.NetworkTransport) *Node {
	b.Helper()
	var trans []*raft.NetworkTransport
	var peers []Peer
	for i := range n {
		tr := mk(b, fmt.Sprintf("n%d", i))
		trans = append(trans, tr)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: string(tr.LocalAddr()), APIAddr: "passthrough:///none"})
	}
	var nodes []*Node
	var logs []*store.LogStore
	b.Cleanup(func() {
		for _, nd := range nodes {
			_ = nd.Shutdown()
		}
		for _, tr := range trans {
			tr.CloseStreams()
			_ = tr.Close()
		}
		for _, l := range logs {
			_ = l.Close()
		}
	})
	for i := range n {
		cfg := fastConfig(peers[i].ID, newFakeClock())
		cfg.Peers = peers
		benchConfig(&cfg)
		deps := Deps{Transport: trans[i]}
		if pebble {
			ls, err := store.OpenLogStore(store.Options{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			logs = append(logs, ls)
			deps.LogStore, deps.StableStore = ls, ls
		}
		node, err := New(cfg, deps)
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, node)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, nd := range nodes {
			if nd.Ready() {
				return nd
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal("no ready leader within 10s")
	return nil
}
