package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RaftSource is what the raft collector reads on every scrape:
// hashicorp/raft's Stats map (string values, as raft reports them), which
// *raft.Raft provides.
type RaftSource interface {
	Stats() map[string]string
}

// raftCollector exports a cluster member's raft state, read at scrape
// time so that no goroutine polls raft between scrapes.
type raftCollector struct {
	src                                      RaftSource
	leader, hasLeader, term, commit, applied *prometheus.Desc
	lastContact, lastLogIndex, configMembers *prometheus.Desc
}

// NewRaftCollector returns the collector of src's raft metrics:
// kvrouter_raft_leader (1 on the leader), kvrouter_raft_has_leader,
// kvrouter_raft_term, kvrouter_raft_commit_index,
// kvrouter_raft_applied_index (their difference is the apply lag),
// kvrouter_raft_last_log_index, kvrouter_raft_last_contact_seconds (a
// follower's time since it heard from the leader; 0 on the leader) and
// kvrouter_raft_voters.
func NewRaftCollector(src RaftSource) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &raftCollector{src: src,
		leader:        d("kvrouter_raft_leader", "1 while this member is the DC's raft leader."),
		hasLeader:     d("kvrouter_raft_has_leader", "1 while this member knows a raft leader."),
		term:          d("kvrouter_raft_term", "Current raft term."),
		commit:        d("kvrouter_raft_commit_index", "Highest raft log index known committed."),
		applied:       d("kvrouter_raft_applied_index", "Highest raft log index raft handed to this member's tables, which apply it shortly after."),
		lastLogIndex:  d("kvrouter_raft_last_log_index", "Highest raft log index stored on this member."),
		lastContact:   d("kvrouter_raft_last_contact_seconds", "Time since this follower last heard from the leader (0 on the leader)."),
		configMembers: d("kvrouter_raft_voters", "Voters in this member's latest raft configuration."),
	}
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.hasLeader, c.term, c.commit, c.applied, c.lastLogIndex, c.lastContact, c.configMembers} {
		ch <- d
	}
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	leader := 0.0
	if st["state"] == "Leader" {
		leader = 1
	}
	gauge(c.leader, leader)
	// raft reports "last_contact" as "never", "0" on the leader, or a
	// duration; a member that never heard a leader has none.
	has := leader
	contact := 0.0
	switch lc := st["last_contact"]; lc {
	case "never", "":
	case "0":
		has = 1
	default:
		if d, err := time.ParseDuration(lc); err == nil {
			has, contact = 1, d.Seconds()
		}
	}
	gauge(c.hasLeader, has)
	gauge(c.lastContact, contact)
	gauge(c.term, statFloat(st, "term"))
	gauge(c.commit, statFloat(st, "commit_index"))
	gauge(c.applied, statFloat(st, "applied_index"))
	gauge(c.lastLogIndex, statFloat(st, "last_log_index"))
	gauge(c.configMembers, statFloat(st, "num_peers")+1)
}

// statFloat reads a numeric raft stat; an absent or malformed one is 0.
func statFloat(st map[string]string, key string) float64 {
	v, err := strconv.ParseFloat(st[key], 64)
	if err != nil {
		return 0
	}
	return v
}
