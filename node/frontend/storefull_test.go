package frontend

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/node/dispatch"
)

// TestStoreFullAnswer: a bind refused because the replicated store's disk
// is full reaches the client as 503 with Retry-After and a body naming
// the cause, however deep the dispatcher wrapped it.
func TestStoreFullAnswer(t *testing.T) {
	diskFull := errors.New("consensus: store: disk below its free-space reserve")
	tests := []struct {
		name string
		err  error
	}{
		{name: "direct", err: fmt.Errorf("%w: %w", dispatch.ErrStoreFull, diskFull)},
		{name: "under ErrStore", err: fmt.Errorf("%w: policy: %w", dispatch.ErrStore, fmt.Errorf("%w: %w", dispatch.ErrStoreFull, diskFull))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, r, _ := setup(t, Config{}, nil)
			r.err = tc.err
			resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x"}`, nil)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503", resp.StatusCode)
			}
			if got := resp.Header.Get("Retry-After"); got != "5" {
				t.Errorf("Retry-After %q, want 5", got)
			}
			var env struct {
				Error struct{ Message, Type, Code string } `json:"error"`
			}
			data, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(data, &env); err != nil {
				t.Fatalf("body %s: %v", data, err)
			}
			if env.Error.Code != "store_full" || env.Error.Type != "server_error" ||
				!strings.Contains(env.Error.Message, "the router's store is out of disk space") {
				t.Fatalf("body %s", data)
			}
			if strings.Contains(env.Error.Message, "reserve") {
				t.Errorf("the client sees the store's detail: %s", data)
			}
		})
	}
}
