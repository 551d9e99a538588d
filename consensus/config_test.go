package consensus

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		return Config{NodeID: "a", Bootstrap: true, Peers: []Peer{{ID: "a", RaftAddr: "x"}}}
	}
	tests := []struct {
		name string
		edit func(*Config)
		key  string
	}{
		{"valid", func(*Config) {}, ""},
		{"no node id", func(c *Config) { c.NodeID = "" }, "node_id"},
		{"lease over heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * time.Second }, "leader_lease_timeout"},
		{"tiny command bound", func(c *Config) { c.MaxCommandBytes = 10 }, "max_command_bytes"},
		{"duplicate peer", func(c *Config) { c.Peers = append(c.Peers, c.Peers[0]) }, "peers[1]"},
		{"bootstrap without self", func(c *Config) { c.Peers[0].ID = "b" }, "peers"},
		{"bootstrap without peers", func(c *Config) { c.Peers = nil }, "peers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			c.EnsureDefaults()
			err := c.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("got %v, want %s", err, tc.key)
			}
		})
	}
}

func TestSessionsConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  SessionsConfig
		ok   bool
	}{
		{"defaults keep-alive to ttl/4", SessionsConfig{TTL: time.Minute, MaxSessions: 1}, true},
		{"keep-alive too slow", SessionsConfig{TTL: time.Minute, MaxSessions: 1, KeepAliveInterval: time.Minute}, false},
		{"no ttl", SessionsConfig{MaxSessions: 1}, false},
		{"no bound", SessionsConfig{TTL: time.Minute}, false},
	}
	c := newCluster(t, 1)
	c.leader()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSessions(c.nodes[0], tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("got %v", err)
			}
			if s != nil {
				_ = s.Close()
			}
		})
	}
}

// TestCommitTimeoutDefault checks the commit timeout default, which bounds
// how late followers learn a burst's last entry committed.
func TestCommitTimeoutDefault(t *testing.T) {
	c := Config{NodeID: "a"}
	c.EnsureDefaults()
	if c.CommitTimeout != DefaultCommitTimeout || c.raftConfig().CommitTimeout != DefaultCommitTimeout {
		t.Fatalf("commit timeout %v, raft's %v; want %v", c.CommitTimeout, c.raftConfig().CommitTimeout, DefaultCommitTimeout)
	}
	c = Config{NodeID: "a", CommitTimeout: time.Second}
	c.EnsureDefaults()
	if c.CommitTimeout != time.Second {
		t.Fatalf("explicit commit timeout replaced by %v", c.CommitTimeout)
	}
}

// TestRaftTimingDefaults: the heartbeat and election timeouts default to
// 500 ms; the lease defaults to 500 ms but never above the heartbeat
// timeout, so that a shorter heartbeat timeout alone is a valid config.
func TestRaftTimingDefaults(t *testing.T) {
	tests := []struct {
		name                         string
		heartbeat                    time.Duration
		wantHB, wantElect, wantLease time.Duration
	}{
		{"all defaults", 0, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
		{"shorter heartbeat", 200 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, 200 * time.Millisecond},
		{"longer heartbeat", 2 * time.Second, 2 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{NodeID: "n1", HeartbeatTimeout: tt.heartbeat}
			c.EnsureDefaults()
			if c.HeartbeatTimeout != tt.wantHB || c.ElectionTimeout != tt.wantElect || c.LeaderLeaseTimeout != tt.wantLease {
				t.Fatalf("heartbeat %v election %v lease %v, want %v %v %v", c.HeartbeatTimeout, c.ElectionTimeout,
					c.LeaderLeaseTimeout, tt.wantHB, tt.wantElect, tt.wantLease)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
