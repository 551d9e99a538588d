package oaiedge

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// advised is an error carrying its own retry advice.
type advised struct{ d time.Duration }

func (a advised) Error() string              { return "advised" }
func (a advised) RetryAdvice() time.Duration { return a.d }

var errPassing = errors.New("test: passing condition")

// TestRetryAfterFromTheTable: Table.Write sets Retry-After from the
// error's class, in whole seconds rounded up; an error's own advice wins
// in a class that advises a retry and adds none to a class that does not.
func TestRetryAfterFromTheTable(t *testing.T) {
	table := NewTable(
		Entry(errPassing, http.StatusServiceUnavailable, "server_error", "passing").Retry(1500 * time.Millisecond),
	)
	tests := []struct {
		name   string
		err    error
		status int
		want   string
	}{
		{name: "class advice rounded up", err: fmt.Errorf("%w: wrapped", errPassing), status: 503, want: "2"},
		{name: "error's own advice wins", err: fmt.Errorf("%w: %w", errPassing, advised{3 * time.Second}), status: 503, want: "3"},
		{name: "zero own advice keeps the class's", err: fmt.Errorf("%w: %w", errPassing, advised{0}), status: 503, want: "2"},
		{name: "body budget", err: ErrBodyBudget, status: 503, want: BudgetRetryAfter},
		{name: "class without advice", err: ErrNotFound, status: 404},
		{name: "own advice in a class without", err: fmt.Errorf("%w: %w", ErrNotReady, advised{time.Second}), status: 503},
		{name: "internal", err: errors.New("boom"), status: 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if status := table.Write(rec, tc.err); status != tc.status || rec.Code != tc.status {
				t.Fatalf("status %d (recorded %d), want %d", status, rec.Code, tc.status)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.want {
				t.Fatalf("Retry-After %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBudgetRetryAfterIsOneSecond pins the body budget's advice, which
// clients and dashboards see.
func TestBudgetRetryAfterIsOneSecond(t *testing.T) {
	if BudgetRetryAfter != "1" {
		t.Fatalf("BudgetRetryAfter %q, want 1", BudgetRetryAfter)
	}
}
