package frontend

import (
	"errors"
	"net/http"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// TestReadSession checks the pin headers, and that the session headers
// (whose rules oaiedge tests) reach the node's session info.
func TestReadSession(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		id      string
		parent  string
		final   bool
		pin     *dispatch.Pin
		err     string
	}{
		{name: "none"},
		{name: "parent", headers: map[string]string{"x-claude-code-session-id": "s", "x-claude-code-agent-id": "ag"}, id: "ag", parent: "s"},
		{name: "final", headers: map[string]string{"X-Session-ID": "a", "X-Dynamo-Session-Final": "true"}, id: "a", final: true},
		{name: "pin any rank", headers: map[string]string{"x-worker-instance-id": "42"}, pin: &dispatch.Pin{Engine: 42, AnyRank: true}},
		{name: "pin rank", headers: map[string]string{"x-worker-instance-id": "42", "x-dp-rank": "3"}, pin: &dispatch.Pin{Engine: 42, Rank: 3}},
		{name: "rank without engine", headers: map[string]string{"x-dp-rank": "3"}, err: "X-Dp-Rank"},
		{name: "bad rank", headers: map[string]string{"x-worker-instance-id": "42", "x-dp-rank": "-1"}, err: "X-Dp-Rank"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			si, err := readSession(oaiedge.SessionKeys{}, h, nil)
			if tc.err != "" {
				if !errors.Is(err, oaiedge.ErrInvalid) || oaiedge.ParamOf(err) != tc.err {
					t.Fatalf("err %v (param %q), want param %q", err, oaiedge.ParamOf(err), tc.err)
				}
				return
			}
			if err != nil || si.ID != tc.id || si.Parent != tc.parent || si.Final != tc.final {
				t.Fatalf("got %+v %v", si, err)
			}
			if (si.Pin == nil) != (tc.pin == nil) || si.Pin != nil && *si.Pin != *tc.pin {
				t.Fatalf("pin %+v, want %+v", si.Pin, tc.pin)
			}
		})
	}
}

func TestSessionHeadersReachRouter(t *testing.T) {
	ts, r, _ := setup(t, Config{}, nil)
	resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x"}`, map[string]string{
		"thread-id": "t", "X-Session-ID": "s", "X-Dynamo-Session-Final": "1", "x-worker-instance-id": "9"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	req := r.lastRequest(t)
	if req.SessionID != "s" || !req.SessionFinal || req.Pin == nil || req.Pin.Engine != 9 {
		t.Fatalf("routed %+v", req)
	}
}
