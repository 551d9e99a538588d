package consensus

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/internal/waittest"
)

// handlerTransport records the heartbeat handler raft sets and whether it
// was closed.
type handlerTransport struct {
	raft.Transport
	cb     func(raft.RPC)
	closed bool
}

func (h *handlerTransport) SetHeartbeatHandler(cb func(raft.RPC)) { h.cb = cb }
func (h *handlerTransport) Close() error                          { h.closed = true; return nil }

// TestHeartbeatGate: the gate's Close (raft's Shutdown calls it) waits for
// a heartbeat being handled on the transport's goroutine, and a heartbeat
// after it gets ErrRaftShutdown without reaching raft, so no raft code
// writes to the stores once Shutdown returned.
func TestHeartbeatGate(t *testing.T) {
	inner := &handlerTransport{}
	g := &heartbeatGate{Transport: inner}
	entered, release := make(chan struct{}), make(chan struct{})
	calls := 0
	g.SetHeartbeatHandler(func(rpc raft.RPC) {
		calls++
		close(entered)
		<-release
		rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
	})
	rpc := func() (raft.RPC, chan raft.RPCResponse) {
		ch := make(chan raft.RPCResponse, 1)
		return raft.RPC{RespChan: ch}, ch
	}
	first, firstResp := rpc()
	go inner.cb(first)
	<-entered
	closed := make(chan struct{})
	go func() { _ = g.Close(); close(closed) }()
	// Close waits for the lock: a waiting writer makes TryRLock fail.
	waittest.Until(t, 10*time.Second, "Close is waiting for the heartbeat in hand", func() bool {
		if g.mu.TryRLock() {
			g.mu.RUnlock()
			return false
		}
		return true
	})
	select {
	case <-closed:
		t.Fatal("Close returned while a heartbeat was being handled")
	default:
	}
	close(release)
	<-closed
	if resp := <-firstResp; resp.Error != nil {
		t.Fatalf("the heartbeat in hand: %v", resp.Error)
	}
	if !inner.closed {
		t.Fatal("the transport was not closed")
	}
	later, laterResp := rpc()
	inner.cb(later)
	if resp := <-laterResp; !errors.Is(resp.Error, raft.ErrRaftShutdown) || calls != 1 {
		t.Fatalf("a heartbeat after Close: %v, handler calls %d", resp.Error, calls)
	}
}
