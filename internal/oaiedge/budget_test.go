package oaiedge

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// budgetRequest is a POST of body, of declared length unless chunked.
func budgetRequest(body string, chunked bool) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	if chunked {
		req.ContentLength = -1
	}
	return req
}

func TestBodyBudgetRefusesThenAdmitsAfterRelease(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		name := map[bool]string{false: "declared", true: "chunked"}[chunked]
		t.Run(name, func(t *testing.T) {
			budget := NewBodyBudget(2048)
			br := BodyReader{MaxBytes: 4096, Timeout: time.Second, Budget: budget}
			first := strings.Repeat("a", 1500)
			body, hold, err := br.ReadHeld(httptest.NewRecorder(), budgetRequest(first, chunked), nil)
			if err != nil || string(body) != first {
				t.Fatalf("first body: %v", err)
			}
			if budget.Held() < 1500 || budget.Held() > 2048 {
				t.Fatalf("held %d after a 1500-byte body", budget.Held())
			}

			rec := httptest.NewRecorder()
			_, refused, err := br.ReadHeld(rec, budgetRequest(strings.Repeat("b", 1000), chunked), nil)
			if !errors.Is(err, ErrBodyBudget) {
				t.Fatalf("second body over the budget: %v, want ErrBodyBudget", err)
			}
			if refused.Bytes() != 0 || budget.Refused() != 1 {
				t.Fatalf("a refusal holds %d bytes, refusals %d", refused.Bytes(), budget.Refused())
			}
			if rec.Header().Get("Connection") != "close" {
				t.Fatalf("refusal headers %v", rec.Header())
			}
			assertBudgetAnswer(t, err)

			hold.Release()
			hold.Release() // a second release gives nothing back twice
			if budget.Held() != 0 {
				t.Fatalf("held %d after the release", budget.Held())
			}
			_, again, err := br.ReadHeld(httptest.NewRecorder(), budgetRequest(strings.Repeat("b", 1000), chunked), nil)
			if err != nil {
				t.Fatalf("after the release: %v", err)
			}
			again.Release()
		})
	}
}

// assertBudgetAnswer checks the refusal's status and OpenAI body.
func assertBudgetAnswer(t *testing.T, err error) {
	t.Helper()
	rec := httptest.NewRecorder()
	if status := NewTable().Write(rec, err); status != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != BudgetRetryAfter {
		t.Fatalf("status %d, Retry-After %q; want 503 and %s", status, rec.Header().Get("Retry-After"), BudgetRetryAfter)
	}
	var b ErrorBody
	if json.Unmarshal(rec.Body.Bytes(), &b) != nil || b.Error.Code == nil || *b.Error.Code != "server_overloaded" ||
		b.Error.Type != "server_error" || strings.HasPrefix(b.Error.Message, "oaiedge") {
		t.Fatalf("body %s", rec.Body.String())
	}
}

func TestBodyBudgetKeepsAQuarterForSmallBodies(t *testing.T) {
	budget := NewBodyBudget(8 * SmallBodyBytes)
	tests := []struct {
		name  string
		n     int64
		admit bool
	}{
		{name: "large to half", n: 4 * SmallBodyBytes, admit: true},
		{name: "large over three quarters", n: 2*SmallBodyBytes + 1, admit: false},
		{name: "large to three quarters", n: 2 * SmallBodyBytes, admit: true},
		{name: "small in the last quarter", n: SmallBodyBytes, admit: true},
		{name: "small over the whole", n: SmallBodyBytes + 1, admit: false},
		{name: "small to the whole", n: SmallBodyBytes, admit: true},
		{name: "nothing left", n: 1, admit: false},
	}
	var holds []BodyHold
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h BodyHold
			if got := h.grow(budget, tc.n); got != tc.admit {
				t.Fatalf("admitted %v at %d held, want %v", got, budget.Held(), tc.admit)
			}
			holds = append(holds, h)
		})
	}
	for i := range holds {
		holds[i].Release()
	}
	if budget.Held() != 0 {
		t.Fatalf("held %d after every release", budget.Held())
	}
}

func TestBodyBudgetChunkedRefusalHoldsNothing(t *testing.T) {
	budget := NewBodyBudget(4096)
	br := BodyReader{MaxBytes: 1 << 20, Timeout: time.Second, Budget: budget}
	_, hold, err := br.ReadHeld(httptest.NewRecorder(), budgetRequest(strings.Repeat("a", 10000), true), nil)
	if !errors.Is(err, ErrBodyBudget) || hold.Bytes() != 0 || budget.Held() != 0 {
		t.Fatalf("a chunked body outgrowing the budget: %v, hold %d, held %d", err, hold.Bytes(), budget.Held())
	}
}

// TestBodyBudgetConcurrent reads bodies from many goroutines at once (run
// it with -race): the budget is never exceeded, every body is either read
// whole or refused, and everything is given back in the end.
func TestBodyBudgetConcurrent(t *testing.T) {
	const limit = 64 << 10
	budget := NewBodyBudget(limit)
	br := BodyReader{MaxBytes: 16 << 10, Timeout: time.Second, Budget: budget}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := 0, 0
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				size := 1 + (g*7919+i*131)%(16<<10)
				body, hold, err := br.ReadHeld(httptest.NewRecorder(), budgetRequest(strings.Repeat("x", size), i%3 == 0), nil)
				if held := budget.Held(); held > limit {
					t.Errorf("held %d over the limit %d", held, limit)
				}
				mu.Lock()
				switch {
				case err == nil && len(body) == size:
					admitted++
				case errors.Is(err, ErrBodyBudget):
					refused++
				default:
					t.Errorf("body of %d: %d bytes, %v", size, len(body), err)
				}
				mu.Unlock()
				hold.Release()
			}
		})
	}
	wg.Wait()
	if budget.Held() != 0 || int64(refused) != budget.Refused() || admitted == 0 {
		t.Fatalf("held %d, refused %d (counted %d), admitted %d", budget.Held(), refused, budget.Refused(), admitted)
	}
	t.Logf("admitted %d, refused %d", admitted, refused)
}

func TestNewEdgeBodyBudget(t *testing.T) {
	tests := []struct {
		name         string
		limit, body  int64
		wantLimit    int64
		wantConfigEr bool
	}{
		{name: "default", limit: 0, body: MaxBodyBytes, wantLimit: MaxBufferedBodyBytes},
		{name: "off", limit: -1, body: MaxBodyBytes, wantLimit: 0},
		{name: "explicit", limit: 128 << 20, body: MaxBodyBytes, wantLimit: 128 << 20},
		{name: "smallest that admits the largest body", limit: (MaxBodyBytes*4 + 2) / 3, body: MaxBodyBytes, wantLimit: (MaxBodyBytes*4 + 2) / 3},
		{name: "too small for the largest body", limit: MaxBodyBytes, body: MaxBodyBytes, wantConfigEr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewEdgeBodyBudget(tc.limit, tc.body)
			if tc.wantConfigEr {
				if !errors.Is(err, ErrBudgetConfig) {
					t.Fatalf("got %v, want ErrBudgetConfig", err)
				}
				return
			}
			if err != nil || b.Limit() != tc.wantLimit {
				t.Fatalf("limit %d, %v; want %d", b.Limit(), err, tc.wantLimit)
			}
			var h BodyHold
			if b != nil && !h.grow(b, tc.body) {
				t.Fatalf("a budget of %d refuses a body of %d", b.Limit(), tc.body)
			}
			h.Release()
		})
	}
}
