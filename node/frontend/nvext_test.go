package frontend

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

func TestParseNVExt(t *testing.T) {
	tests := []struct {
		name, raw string
		field     string // "" when valid
	}{
		{"absent", ``, ""},
		{"null", `null`, ""},
		{"hints", `{"agent_hints":{"priority":5,"strict_priority":1,"osl":1024,"overlap_score_credit":0.5,"speculative_prefill":true}}`, ""},
		{"session open", `{"session_control":{"session_id":"s1","action":"open"}}`, ""},
		{"direct", `{"backend_instance_id":7,"dp_rank":1}`, ""},
		{"unknown fields ignored", `{"future":{"x":1}}`, ""},
		{"negative priority", `{"agent_hints":{"priority":-1}}`, "agent_hints.priority"},
		{"huge osl", `{"agent_hints":{"osl":99999999999}}`, "agent_hints.osl"},
		{"negative credit", `{"agent_hints":{"overlap_score_credit":-0.1}}`, "agent_hints.overlap_score_credit"},
		{"bad action", `{"session_control":{"session_id":"s","action":"reset"}}`, "session_control.action"},
		{"no session id", `{"session_control":{"action":"close"}}`, "session_control.session_id"},
		{"fractional priority", `{"agent_hints":{"priority":2.5}}`, ""},
		{"priority over the bound", `{"agent_hints":{"priority":86401}}`, "agent_hints.priority"},
		{"negative strict priority", `{"agent_hints":{"strict_priority":-2}}`, "agent_hints.strict_priority"},
		{"conflicting workers", `{"backend_instance_id":1,"decode_worker_id":2}`, "decode_worker_id"},
		{"rank without worker", `{"dp_rank":1}`, "dp_rank"},
		{"not an object", `[1]`, "nvext"},
		{"wrong type", `{"agent_hints":{"priority":"high"}}`, "nvext"},
		{"oversized", `{"x":"` + strings.Repeat("a", MaxNVExtBytes) + `"}`, "nvext"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ParseNVExt([]byte(tc.raw))
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, oaiedge.ErrInvalid) || !strings.HasSuffix(oaiedge.ParamOf(err), tc.field) {
				t.Fatalf("err = %v (param %q), want an invalid-parameter error naming %s", err, oaiedge.ParamOf(err), tc.field)
			}
			_ = x
		})
	}
	x, _ := ParseNVExt([]byte(`{"agent_hints":{"priority":5,"osl":64},"decode_worker_id":9}`))
	if *x.AgentHints.Priority != 5 || *x.AgentHints.OSL != 64 {
		t.Fatalf("hints %+v", x.AgentHints)
	}
	if w, ok := x.Worker(); !ok || w != 9 {
		t.Fatalf("worker %d %v", w, ok)
	}
}

func FuzzParseNVExt(f *testing.F) {
	for _, s := range []string{`{"agent_hints":{"priority":5}}`, `{"session_control":{"session_id":"s","action":"open"}}`, `null`, `{"backend_instance_id":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		x, err := ParseNVExt(raw)
		if err != nil && (!errors.Is(err, oaiedge.ErrInvalid) || !strings.HasPrefix(oaiedge.ParamOf(err), "nvext")) {
			t.Fatalf("refusal not naming an nvext field: %v", err)
		}
		if err == nil && x.AgentHints.Priority != nil && *x.AgentHints.Priority < 0 {
			t.Fatal("negative priority accepted")
		}
	})
}
