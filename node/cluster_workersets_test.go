package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

func wsCard(id uint64, checksum string) *kvrpb.WorkerCard {
	return &kvrpb.WorkerCard{EngineId: id, DpSize: 1, Model: "ws-model", BlockSize: 16, TotalKvBlocks: 64,
		MaxNumBatchedTokens: 512, Device: kvrpb.DeviceKind_DEVICE_KIND_GPU,
		EndpointUrl: fmt.Sprintf("http://127.0.0.1:%d", 9000+id), ModelChecksum: checksum, Incarnation: 1, Version: 1}
}

// incumbentOn is node i's incumbent checksum for the ws-model set.
func (c *dcCluster) incumbentOn(i int) string {
	for _, st := range c.nodes[i].WorkerSets().Status() {
		if st.Key.Model == "ws-model" {
			return st.Incumbent.Checksum
		}
	}
	return ""
}

func (c *dcCluster) waitIncumbent(t *testing.T, want string) {
	t.Helper()
	waittest.UntilNil(t, 10*time.Second, "every node has the incumbent "+want, func() error {
		for i := range c.nodes {
			if c.incumbentOn(i) != want {
				return fmt.Errorf("incumbents %q %q %q", c.incumbentOn(0), c.incumbentOn(1), c.incumbentOn(2))
			}
		}
		return nil
	})
}

// TestClusterWorkerSetIncumbentIsReplicated checks that the nodes of a
// cluster route a worker set to the leader's incumbent although they saw
// the cohorts' cards in different orders, and that a restarted node
// follows the replicated record, not its own first sighting.
func TestClusterWorkerSetIncumbentIsReplicated(t *testing.T) {
	c := startDCCluster(t, 1)
	lead := c.leader()
	if lead < 0 {
		t.Fatal("no leader")
	}
	observe := func(i int, order ...*kvrpb.WorkerCard) {
		for _, card := range order {
			c.nodes[i].WorkerSets().Observe(card)
		}
	}
	a, b := wsCard(101, "A"), wsCard(102, "B")
	observe(lead, a, b) // the leader saw A first: A is the incumbent
	for i := range c.nodes {
		if i != lead {
			observe(i, b, a) // the others saw B first
		}
	}
	c.waitIncumbent(t, "A")

	other := (lead + 1) % 3
	c.stop(other)
	c.start(other)
	observe(other, b, a)
	c.waitIncumbent(t, "A")

	// Succession: the incumbent cohort leaves every node; B succeeds.
	for i := range c.nodes {
		c.nodes[i].WorkerSets().Leave(101, 1)
	}
	c.waitIncumbent(t, "B")
}
