package frontend

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

func TestNVExtReachesTheRoutingRequest(t *testing.T) {
	credit := 0.25
	tests := []struct {
		name, nvext string
		hdr         map[string]string
		want        func(*dispatch.Request) bool
	}{
		{"hints", `{"agent_hints":{"priority":2.5,"strict_priority":3,"osl":512,"overlap_score_credit":0.25}}`, nil,
			func(r *dispatch.Request) bool {
				return r.Priority == 2.5 && r.StrictPriority == 3 && r.OutputTokens == 512 &&
					r.OverlapScoreCredit != nil && *r.OverlapScoreCredit == credit
			}},
		{"priority headers", ``, map[string]string{PriorityHeader: "4", StrictPriorityHeader: "1"},
			func(r *dispatch.Request) bool { return r.Priority == 4 && r.StrictPriority == 1 }},
		{"body priority wins over header", `{"agent_hints":{"priority":1}}`, map[string]string{PriorityHeader: "9"},
			func(r *dispatch.Request) bool { return r.Priority == 1 }},
		{"session open binds", `{"session_control":{"session_id":"s1","action":"open"}}`, nil,
			func(r *dispatch.Request) bool { return r.SessionID == "s1" && !r.SessionFinal }},
		{"session close ends", `{"session_control":{"session_id":"s1","action":"close"}}`, nil,
			func(r *dispatch.Request) bool { return r.SessionID == "s1" && r.SessionFinal }},
		{"same session as the header", `{"session_control":{"session_id":"s1","action":"open"}}`, map[string]string{"X-Session-Id": "s1"},
			func(r *dispatch.Request) bool { return r.SessionID == "s1" }},
		{"worker for direct, any rank", `{"backend_instance_id":42}`, nil,
			func(r *dispatch.Request) bool { return r.Pin != nil && r.Pin.Engine == 42 && r.Pin.AnyRank }},
		{"decode worker and rank", `{"decode_worker_id":42,"dp_rank":2}`, nil,
			func(r *dispatch.Request) bool {
				return r.Pin != nil && *r.Pin == dispatch.Pin{Engine: routing.WorkerID(42), Rank: 2}
			}},
		{"no nvext", ``, nil, func(r *dispatch.Request) bool {
			return r.Priority == 0 && r.OutputTokens == 0 && r.OverlapScoreCredit == nil && r.Pin == nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, r, _ := setup(t, Config{}, nil)
			status, _, body := postChat(t, ts, chatWithNVExt(tc.nvext), tc.hdr)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			got := r.lastRequest(t)
			if !tc.want(&got) {
				t.Fatalf("routed %+v", got)
			}
		})
	}
}

func TestNVExtBadValuesAre400NamingTheField(t *testing.T) {
	tests := []struct {
		name, nvext string
		hdr         map[string]string
		param       string
	}{
		{"negative priority", `{"agent_hints":{"priority":-1}}`, nil, "nvext.agent_hints.priority"},
		{"priority not a number", `{"agent_hints":{"priority":"high"}}`, nil, "nvext"},
		{"osl over the bound", `{"agent_hints":{"osl":2000000}}`, nil, "nvext.agent_hints.osl"},
		{"negative credit", `{"agent_hints":{"overlap_score_credit":-1}}`, nil, "nvext.agent_hints.overlap_score_credit"},
		{"unknown session action", `{"session_control":{"session_id":"s","action":"pause"}}`, nil, "nvext.session_control.action"},
		{"session differs from the header", `{"session_control":{"session_id":"s2","action":"open"}}`,
			map[string]string{"X-Session-Id": "s1"}, "nvext.session_control.session_id"},
		{"worker differs from the pin header", `{"backend_instance_id":42}`,
			map[string]string{headerPinEngine: "41"}, "nvext.backend_instance_id"},
		{"bad priority header", ``, map[string]string{PriorityHeader: "urgent"}, PriorityHeader},
		{"negative strict priority header", ``, map[string]string{StrictPriorityHeader: "-1"}, StrictPriorityHeader},
		{"nvext not an object", `[1]`, nil, "nvext"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, r, _ := setup(t, Config{}, nil)
			status, _, body := postChat(t, ts, chatWithNVExt(tc.nvext), tc.hdr)
			var e struct {
				Error struct{ Param string } `json:"error"`
			}
			_ = json.Unmarshal(body, &e)
			if status != 400 || e.Error.Param != tc.param {
				t.Fatalf("status %d param %q, want 400 naming %q: %s", status, e.Error.Param, tc.param, body)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.reqs) != 0 {
				t.Fatal("a refused request was routed")
			}
		})
	}
}

// chatWithNVExt is a chat body with the given nvext value ("" for none).
func chatWithNVExt(nvext string) string {
	if nvext == "" {
		return chat + "}"
	}
	return chat + `,"nvext":` + nvext + "}"
}

func FuzzReadNVExt(f *testing.F) {
	f.Add([]byte(`{"model":"m","nvext":{"agent_hints":{"priority":3}}}`))
	f.Add([]byte(`{"model":"m","nvext":{"agent_hints":{"priority":-1e400}}}`))
	f.Add([]byte(`{"model":"m","nvext":null}`))
	f.Add([]byte(`{"model":"m","nvext":[1]}`))
	f.Add([]byte(`{"nvext":{"session_control":{"session_id":"s","action":"close"},"backend_instance_id":3},"model":"m"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := oaiedge.Parse(body, oaiedge.Tokenize, oaiedge.Options{MaxPromptTokens: 1 << 20})
		if err != nil {
			return
		}
		x, err := ParseNVExt(p.NVExt)
		if err != nil {
			if !errors.Is(err, oaiedge.ErrInvalid) {
				t.Fatalf("refusal without ErrInvalid: %v", err)
			}
			return
		}
		var r dispatch.Request
		if x.apply(&r) == nil && (!(r.Priority >= 0) || r.Priority > dispatch.MaxPriority || r.OutputTokens < 0) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
