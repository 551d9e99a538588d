package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/node/dispatch"
)

// TestRetryAfterPerClass: each error class that advises a retry answers
// with its Retry-After, from the one error table; the others carry none.
func TestRetryAfterPerClass(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		retry  string
	}{
		{name: "overload", err: fmt.Errorf("%w: all busy", dispatch.ErrOverloaded), status: 529, retry: "1"},
		{name: "policy class, own advice", err: &dispatch.PolicyClassError{Class: "batch", Waited: time.Second, RetryAfter: 2500 * time.Millisecond},
			status: 529, retry: "3"},
		{name: "policy class, no advice", err: &dispatch.PolicyClassError{Class: "batch", Waited: time.Second}, status: 529, retry: "1"},
		{name: "store full", err: fmt.Errorf("%w: disk", dispatch.ErrStoreFull), status: 503, retry: "5"},
		{name: "no engine", err: dispatch.ErrNoEngine, status: 503},
		{name: "bad request", err: fmt.Errorf("%w: nope", dispatch.ErrBadRequest), status: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, r, _ := setup(t, Config{}, nil)
			r.err = tc.err
			status, hdr, body := postChat(t, ts, chat+"}", nil)
			if status != tc.status || hdr.Get("Retry-After") != tc.retry {
				t.Fatalf("status %d Retry-After %q, want %d %q; body %s", status, hdr.Get("Retry-After"), tc.status, tc.retry, body)
			}
			var pe *dispatch.PolicyClassError
			if !errors.As(tc.err, &pe) {
				return
			}
			var got struct {
				Error struct {
					RetryAfterSecs int64 `json:"retry_after_secs"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &got); err != nil || fmt.Sprint(got.Error.RetryAfterSecs) != tc.retry {
				t.Fatalf("retry_after_secs %d, want the header's %s (%v)", got.Error.RetryAfterSecs, tc.retry, err)
			}
		})
	}
}

// unbindFails is a router whose Unbind fails with err.
type unbindFails struct {
	*fakeRouter
	err error
}

func (u unbindFails) Unbind(context.Context, string) error { return u.err }

// TestRetryAfterOnTableAnswers: an answer written by the table itself
// (here the session API's) carries its class's advice too.
func TestRetryAfterOnTableAnswers(t *testing.T) {
	r := unbindFails{newFakeRouter("http://127.0.0.1:1", "m"), fmt.Errorf("%w: disk", dispatch.ErrStoreFull)}
	ts := startFrontend(t, Config{}, r)
	req, err := http.NewRequest(http.MethodDelete, ts.URL+"/v1/sessions/s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("status %d Retry-After %q, want 503 with 5", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
