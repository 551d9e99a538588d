package dispatch

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/routing/policy"
)

// advertisingEngines is a fake fleet whose worker set advertises router
// settings for model "m".
type advertisingEngines struct {
	*fakeEngines
	mu      sync.Mutex
	cfg     map[string]string
	version uint64
}

var _ Advertiser = (*advertisingEngines)(nil)

func (a *advertisingEngines) RouterConfig(model string) (map[string]string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg, model == "m" && len(a.cfg) > 0
}

func (a *advertisingEngines) RouterConfigVersion() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.version
}

// advertise replaces the advertised settings, as a succession would.
func (a *advertisingEngines) advertise(cfg map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfg = cfg
	a.version++
}

// TestAdvertisedSettingsReplaceTheRouters: a worker set's advertised
// settings replace the router's selector and busy thresholds for its
// model, without merging (a threshold the set leaves out is unset); an
// invalid advertisement leaves the router's; runtime thresholds win.
func TestAdvertisedSettingsReplaceTheRouters(t *testing.T) {
	zero := int64(0)
	eng := &advertisingEngines{fakeEngines: newFakeEngines()}
	eng.add(1, "m", 1, testBlockSize)
	eng.add(2, "m", 1, testBlockSize)
	cfg := DefaultConfig()
	cfg.Seed = 7
	cfg.Thresholds.ActivePrefillTokens = &zero // any prefill makes an engine busy
	d, err := New(cfg, eng, newFixture(t, 0, nil).idx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq := 0
	route := func() error {
		seq++
		dec, err := d.Route(t0ctx, &Request{ID: fmt.Sprintf("r%d", seq), Model: "m", Tokens: prompt(uint32(seq*100), 64)})
		if err == nil {
			t.Cleanup(func() { dec.Done(nil) })
		}
		return err
	}
	steps := []struct {
		name      string
		advertise map[string]string
		runtime   *policy.Thresholds
		want      error // of a request while both engines hold one each
	}{
		{"router's thresholds", nil, nil, ErrOverloaded},
		{"set advertises no thresholds", map[string]string{"router_mode": "kv", "kv_overlap_score_credit": "0.5"}, nil, nil},
		{"set advertises its own", map[string]string{"active_prefill_tokens_threshold": "0"}, nil, ErrOverloaded},
		{"runtime thresholds win", map[string]string{"router_mode": "kv"}, &policy.Thresholds{ActivePrefillTokens: &zero}, ErrOverloaded},
		{"set advertises direct", map[string]string{"router_mode": "direct"}, nil, ErrBadRequest},
		{"invalid advertisement keeps the router's", map[string]string{"router_temperature": "-1"}, nil, ErrOverloaded},
		{"unknown keys are ignored", map[string]string{"router_min_initial_workers": "3"}, nil, nil},
	}
	for _, st := range steps {
		eng.advertise(st.advertise)
		if err := d.SetThresholds("m", st.runtime); err != nil {
			t.Fatal(err)
		}
		for d.core.Booked() < 2 { // both engines busy
			if err := route(); err != nil {
				break
			}
		}
		if err := route(); !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Fatalf("%s: Route: %v, want %v", st.name, err, st.want)
		}
	}
}
