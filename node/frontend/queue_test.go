package frontend

import (
	"context"
	"encoding/json"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/queue"
)

// post sends a chat completion with extra headers and returns the status,
// headers and body.
func postChat(t *testing.T, ts *testServer, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}]`

func TestPolicyClassRefusalIsStructured(t *testing.T) {
	ts, r, _ := setup(t, Config{}, nil)
	r.err = &dispatch.PolicyClassError{Class: "standard", RetryAfter: 2 * time.Second,
		Limit: &queue.LimitError{Class: "standard", Limit: queue.LimitRequests, PerWorker: 4, Workers: 3, Effective: 12, Pending: 12}}
	status, hdr, body := postChat(t, ts, chat+"}", nil)
	var got struct {
		Error struct {
			Code           string `json:"code"`
			PolicyClass    string `json:"policy_class"`
			Limit          string `json:"limit"`
			EffectiveLimit int64  `json:"effective_limit"`
			RetryAfterSecs int64  `json:"retry_after_secs"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	e := got.Error
	if status != 529 || hdr.Get("Retry-After") != "2" || e.Code != "policy_class_queue_limit" || e.PolicyClass != "standard" ||
		e.Limit != "request_queue_limit_per_worker" || e.EffectiveLimit != 12 || e.RetryAfterSecs != 2 {
		t.Fatalf("status %d Retry-After %q body %s", status, hdr.Get("Retry-After"), body)
	}
}

func TestQueueInputs(t *testing.T) {
	tests := []struct {
		name, body string
		hdr        map[string]string
		status     int
		class      string
		prio       float64
	}{
		{"priority and class", chat + `,"nvext":{"agent_hints":{"priority":2.5}}}`,
			map[string]string{PolicyClassHeader: "premium"}, 200, "premium", 2.5},
		{"no hints", chat + "}", nil, 200, "", 0},
		{"negative priority", chat + `,"nvext":{"agent_hints":{"priority":-1}}}`, nil, 400, "", 0},
		{"priority not a number", chat + `,"nvext":{"agent_hints":{"priority":"high"}}}`, nil, 400, "", 0},
		{"malformed class header", chat + "}", map[string]string{PolicyClassHeader: "gold class!"}, 400, "", 0},
		{"unknown but valid class passes on", chat + "}", map[string]string{PolicyClassHeader: "platinum"}, 200, "platinum", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, r, _ := setup(t, Config{}, nil)
			status, _, body := postChat(t, ts, tc.body, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if status == 400 && !strings.Contains(string(body), `"param"`) {
				t.Fatalf("refusal names no parameter: %s", body)
			}
			if status == 200 {
				got := r.lastRequest(t)
				if got.PolicyClass != tc.class || got.Priority != tc.prio {
					t.Fatalf("routed with class %q priority %v", got.PolicyClass, got.Priority)
				}
			}
		})
	}
}

// memThresholds is a ThresholdStore in memory.
type memThresholds struct {
	mu sync.Mutex
	m  map[string]policy.Thresholds
}

func (s *memThresholds) Thresholds(model string) (policy.Thresholds, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	th, ok := s.m[model]
	return th, ok
}

func (s *memThresholds) SetThresholds(_ context.Context, model string, th *policy.Thresholds) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if th == nil {
		delete(s.m, model)
	} else {
		s.m[model] = *th
	}
	return nil
}

func TestBusyThresholdAPI(t *testing.T) {
	store := &memThresholds{m: map[string]policy.Thresholds{}}
	const token = "s3cret-operator-token"
	edge := EdgeConfig{AccessConfig: oaiedge.AccessConfig{OperatorTokens: []string{token}}}
	ts, _, _ := setup(t, Config{Edge: edge, Admin: AdminConfig{Thresholds: store}}, nil)
	off, _, _ := setup(t, Config{Edge: edge}, nil)
	call := func(ts *testServer, method, path, token, body string) (int, string) {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name                string
		ts                  *testServer
		method, path, token string
		body                string
		status              int
		contains            string
	}{
		{"no token", ts, "GET", "/busy_threshold?model=m", "", "", 401, "authentication_error"},
		{"wrong token", ts, "GET", "/busy_threshold?model=m", "nope", "", 401, "authentication_error"},
		{"no threshold store", off, "GET", "/busy_threshold?model=m", token, "", 403, "admin_api_disabled"},
		{"set", ts, "POST", "/busy_threshold", token, `{"model":"m","active_prefill_tokens_threshold_frac":1.5}`, 200, `"source":"runtime"`},
		{"read back", ts, "GET", "/busy_threshold?model=m", token, "", 200, `"active_prefill_tokens_threshold_frac":1.5`},
		{"invalid value", ts, "POST", "/busy_threshold", token, `{"model":"m","active_decode_blocks_threshold":2}`, 400, "active_decode_blocks_threshold"},
		{"unknown key", ts, "POST", "/busy_threshold", token, `{"model":"m","threshold":2}`, 400, "threshold"},
		{"reset", ts, "POST", "/busy_threshold", token, `{"model":"m","reset":true}`, 200, `"source":"config"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(tc.ts, tc.method, tc.path, tc.token, tc.body)
			if status != tc.status || !strings.Contains(body, tc.contains) {
				t.Fatalf("got %d %s, want %d containing %q", status, body, tc.status, tc.contains)
			}
		})
	}
}
