package fleet

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// setCard is a valid card of engine id in the default worker set of model
// m, with the given checksum and advertised router settings.
func setCard(id uint64, checksum string, cfg map[string]string) *kvrpb.WorkerCard {
	return &kvrpb.WorkerCard{EngineId: id, DpSize: 1, Model: "m", BlockSize: 16, TotalKvBlocks: 1024,
		MaxNumBatchedTokens: 8192, Device: kvrpb.DeviceKind_DEVICE_KIND_GPU,
		EndpointUrl: fmt.Sprintf("http://127.0.0.1:%d", 9000+id), Checksum: fmt.Sprint("card-", id),
		ModelChecksum: checksum, Incarnation: 1, Version: 1, RouterConfig: cfg}
}

// split routes n requests round robin over the ranks the registry lists
// for model m, as the dispatcher would with the round-robin policy, and
// returns how many each engine got.
func split(r *Registry, n int) map[routing.WorkerID]int {
	out := map[routing.WorkerID]int{}
	ws := r.Workers("m")
	if len(ws) == 0 {
		return out
	}
	for i := range n {
		out[ws[i%len(ws)].Worker.ID]++
	}
	return out
}

// TestWorkerSetAdmissionScenario walks one worker set through an
// incumbent, mismatched newcomers, duplicate discovery events, the last
// incumbent leaving and the succession, asserting the traffic split and
// the ERROR logs at each step.
func TestWorkerSetAdmissionScenario(t *testing.T) {
	var logs bytes.Buffer
	sets := NewWorkerSets(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	reg := NewRegistry(3*time.Second, nil)
	reg.UseWorkerSets(sets)
	now := time.Unix(1_700_000_000, 0)
	register := func(c *kvrpb.WorkerCard) {
		t.Helper()
		if _, err := reg.Register(c, now); err != nil {
			t.Fatal(err)
		}
	}
	errorLogs := func() int { return strings.Count(logs.String(), "level=ERROR") }
	steps := []struct {
		name   string
		do     func()
		want   map[routing.WorkerID]int
		errors int // ERROR lines so far
	}{
		{"incumbent reserves the set", func() {
			register(setCard(1, "A", map[string]string{"router_mode": "kv"}))
			register(setCard(2, "A", nil))
		}, map[routing.WorkerID]int{1: 50, 2: 50}, 0},
		{"mismatched newcomer gets no traffic", func() {
			register(setCard(3, "B", map[string]string{"router_mode": "round-robin"}))
		}, map[routing.WorkerID]int{1: 50, 2: 50}, 1},
		{"second replica of the rejected cohort: no new ERROR", func() {
			register(setCard(4, "B", nil))
		}, map[routing.WorkerID]int{1: 50, 2: 50}, 1},
		{"another checksum is another rejected cohort", func() {
			register(setCard(5, "C", nil))
		}, map[routing.WorkerID]int{1: 50, 2: 50}, 2},
		{"duplicate discovery events change nothing", func() {
			for range 3 {
				register(setCard(1, "A", nil))
				register(setCard(3, "B", nil))
				register(setCard(5, "C", nil))
			}
		}, map[routing.WorkerID]int{1: 50, 2: 50}, 2},
		{"one incumbent leaves: the other takes everything", func() {
			reg.Deregister(1, 1, FromEngine)
		}, map[routing.WorkerID]int{2: 100}, 2},
		{"last incumbent leaves: the oldest cohort (B) succeeds", func() {
			reg.Deregister(2, 1, FromEngine)
		}, map[routing.WorkerID]int{3: 50, 4: 50}, 2},
		{"the old checksum returns as a rejected cohort at the end", func() {
			register(setCard(1, "A", nil))
		}, map[routing.WorkerID]int{3: 50, 4: 50}, 3},
		{"duplicate of a departed incumbent's deregistration changes nothing", func() {
			reg.Deregister(2, 1, FromEngine)
		}, map[routing.WorkerID]int{3: 50, 4: 50}, 3},
		{"B leaves by silence: C, older than A's return, succeeds", func() {
			now = now.Add(2 * time.Second)
			for _, id := range []uint64{1, 5} {
				register(setCard(id, map[uint64]string{1: "A", 5: "C"}[id], nil))
			}
			now = now.Add(2 * time.Second)
			reg.Sweep(now, 0)
		}, map[routing.WorkerID]int{5: 100}, 3},
	}
	for _, st := range steps {
		st.do()
		if got := split(reg, 100); !maps.Equal(got, st.want) {
			t.Fatalf("%s: traffic split %v, want %v\nlogs:\n%s", st.name, got, st.want, logs.String())
		}
		if got := errorLogs(); got != st.errors {
			t.Fatalf("%s: %d ERROR logs, want %d\nlogs:\n%s", st.name, got, st.errors, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "worker set succession") {
		t.Fatalf("no succession logged:\n%s", logs.String())
	}
}

// TestWorkerSetConfigIsTheIncumbents checks that a rejected cohort cannot
// change the set's advertised router settings, and that a successor's
// settings replace, not merge with, its predecessor's.
func TestWorkerSetConfigIsTheIncumbents(t *testing.T) {
	sets := NewWorkerSets(nil)
	sets.Observe(setCard(1, "A", map[string]string{"router_mode": "kv", "kv_overlap_score_credit": "0.5"}))
	sets.Observe(setCard(2, "B", map[string]string{"router_mode": "round-robin"}))
	sets.Observe(setCard(1, "A", map[string]string{"router_mode": "random"})) // same checksum: the first card's settings stay
	if cfg, ok := sets.RouterConfig("m"); !ok || cfg["router_mode"] != "kv" || cfg["kv_overlap_score_credit"] != "0.5" {
		t.Fatalf("config %v, %v; want the incumbent's", cfg, ok)
	}
	sets.Leave(1, 1)
	cfg, ok := sets.RouterConfig("m")
	if !ok || !maps.Equal(cfg, map[string]string{"router_mode": "round-robin"}) {
		t.Fatalf("after succession: config %v; want B's alone", cfg)
	}
	st := sets.Status()
	if len(st) != 1 || st[0].Incumbent.Checksum != "B" || len(st[0].Rejected) != 0 {
		t.Fatalf("status %+v", st)
	}
}

// TestModelChecksumDerived checks the checksum of cards that carry no
// model checksum: per-engine fields do not count, block size and
// advertised settings do.
func TestModelChecksumDerived(t *testing.T) {
	base := setCard(1, "", nil)
	other := setCard(2, "", nil) // another engine id, endpoint and card checksum
	bs := setCard(3, "", nil)
	bs.BlockSize = 32
	cfg := setCard(4, "", map[string]string{"router_mode": "kv"})
	if ModelChecksum(base) != ModelChecksum(other) {
		t.Fatal("per-engine fields changed the model checksum")
	}
	if ModelChecksum(base) == ModelChecksum(bs) || ModelChecksum(base) == ModelChecksum(cfg) {
		t.Fatal("block size or router settings did not change the model checksum")
	}
	if got := ModelChecksum(setCard(5, "explicit", nil)); got != "explicit" {
		t.Fatalf("explicit model checksum ignored: %q", got)
	}
}

// TestWorkerSetsAreKeyedByRoleAndEndpoint checks that engines of one model
// in another role or namespace are another set, not a rejected cohort.
func TestWorkerSetsAreKeyedByRoleAndEndpoint(t *testing.T) {
	sets := NewWorkerSets(nil)
	a := setCard(1, "A", nil)
	b := setCard(2, "B", nil)
	b.WorkerType = "prefill"
	c := setCard(3, "C", nil)
	c.Namespace = "dgd-v2"
	for _, card := range []*kvrpb.WorkerCard{a, b, c} {
		if !sets.Observe(card) {
			t.Fatalf("engine %d rejected", card.EngineId)
		}
	}
	if got := len(sets.Status()); got != 3 {
		t.Fatalf("%d sets, want 3", got)
	}
	// A card that moves an engine to another checksum moves it between
	// cohorts: engine 1 alone was the incumbent, so its new checksum
	// reserves the set afresh.
	moved := setCard(1, "A2", nil)
	if !sets.Observe(moved) {
		t.Fatal("moved engine rejected")
	}
	ids := slices.Collect(maps.Keys(sets.members))
	if len(ids) != 3 {
		t.Fatalf("members %v", ids)
	}
}
