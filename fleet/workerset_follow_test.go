package fleet

import (
	"maps"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// fixedIncumbents is an IncumbentSource with settable decisions.
type fixedIncumbents struct {
	m   map[SetKey]string
	gen uint64
}

func (f *fixedIncumbents) Incumbent(k SetKey) (string, bool) { s, ok := f.m[k]; return s, ok }
func (f *fixedIncumbents) Generation() uint64                { return f.gen }

// TestWorkerSetsFollowTheDecision checks that a following process routes
// by the decided incumbent whatever order it saw the cards in, keeps its
// local order while there is no decision or the decided cohort is absent,
// and reports a new router-config version when the decision changes.
func TestWorkerSetsFollowTheDecision(t *testing.T) {
	key := KeyOf(setCard(1, "A", nil))
	src := &fixedIncumbents{m: map[SetKey]string{}}
	sets := NewWorkerSets(nil)
	sets.Follow(src)
	reg := NewRegistry(3*time.Second, nil)
	reg.UseWorkerSets(sets)
	now := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		id  uint64
		sum string
	}{{3, "B"}, {1, "A"}, {2, "A"}} { // B first, unlike the decision below
		if _, err := reg.Register(setCard(c.id, c.sum, map[string]string{"router_mode": c.sum}), now); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name   string
		decide string // "" leaves no decision
		want   map[routing.WorkerID]int
		config string
	}{
		{name: "no decision: local first sighting", want: map[routing.WorkerID]int{3: 100}, config: "B"},
		{name: "decided A: A gets the traffic", decide: "A", want: map[routing.WorkerID]int{1: 50, 2: 50}, config: "A"},
		{name: "decided a cohort this process lacks: local order", decide: "Z", want: map[routing.WorkerID]int{3: 100}, config: "B"},
	}
	for _, st := range steps {
		delete(src.m, key)
		if st.decide != "" {
			src.m[key] = st.decide
		}
		before := sets.RouterConfigVersion()
		src.gen++
		if sets.RouterConfigVersion() == before {
			t.Fatalf("%s: router-config version did not move", st.name)
		}
		if got := split(reg, 100); !maps.Equal(got, st.want) {
			t.Fatalf("%s: split %v, want %v", st.name, got, st.want)
		}
		if cfg, _ := sets.RouterConfig("m"); cfg["router_mode"] != st.config {
			t.Fatalf("%s: config %v, want %s's", st.name, cfg, st.config)
		}
		if s := sets.Status(); s[0].Incumbent.Checksum != st.config || len(s[0].Rejected) != 1 {
			t.Fatalf("%s: status %+v", st.name, s)
		}
	}
}
