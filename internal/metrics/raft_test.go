package metrics

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeRaft map[string]string

func (f fakeRaft) Stats() map[string]string { return f }

func TestRaftCollector(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stats fakeRaft
		want  map[string]float64
	}{
		{"leader", fakeRaft{"state": "Leader", "last_contact": "0", "term": "3", "commit_index": "10", "applied_index": "9", "last_log_index": "10", "num_peers": "2"},
			map[string]float64{"leader": 1, "has_leader": 1, "term": 3, "commit_index": 10, "applied_index": 9, "last_log_index": 10, "last_contact_seconds": 0, "voters": 3}},
		{"follower", fakeRaft{"state": "Follower", "last_contact": "250ms", "term": "3", "commit_index": "10", "applied_index": "10", "last_log_index": "10", "num_peers": "2"},
			map[string]float64{"leader": 0, "has_leader": 1, "term": 3, "commit_index": 10, "applied_index": 10, "last_log_index": 10, "last_contact_seconds": 0.25, "voters": 3}},
		{"no leader heard", fakeRaft{"state": "Candidate", "last_contact": "never", "num_peers": "0", "term": "bogus"},
			map[string]float64{"leader": 0, "has_leader": 0, "term": 0, "commit_index": 0, "applied_index": 0, "last_log_index": 0, "last_contact_seconds": 0, "voters": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(NewRaftCollector(tc.stats))
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, mf := range mfs {
				got[mf.GetName()[len("kvrouter_raft_"):]] = mf.GetMetric()[0].GetGauge().GetValue()
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
