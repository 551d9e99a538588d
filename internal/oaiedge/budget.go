package oaiedge

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// ErrBodyBudget: the process already holds as many request body bytes as
// its BodyBudget allows, so this body is refused before it is read (503
// with Retry-After). The message is the client's, after the package
// prefix.
var ErrBodyBudget = errors.New("oaiedge: the server is receiving too many request bodies at once; retry after the Retry-After delay")

// budgetRows is the class of ErrBodyBudget. It is 503, not 429: the
// refusal says the server is momentarily full, not that this client went
// over a rate or a quota (what 429 means to OpenAI clients, which then
// back off per key), and OpenAI's own answer to an overloaded server is
// 503 with a retry.
var budgetRows = []Row{
	Entry(ErrBodyBudget, http.StatusServiceUnavailable, "server_error", "server_overloaded").Retry(budgetRetryAfter),
}

// budgetRetryAfter is the retry advice of an ErrBodyBudget refusal: a
// body in flight is held for one request, so budget frees within about a
// request's duration.
const budgetRetryAfter = time.Second

// BudgetRetryAfter is the Retry-After header of an ErrBodyBudget refusal,
// as its class in budgetRows writes it.
var BudgetRetryAfter = strconv.FormatInt(budgetRows[0].RetrySeconds(ErrBodyBudget), 10)

// SmallBodyBytes is the size up to which a body may take the last quarter
// of a BodyBudget. Larger bodies stop at three quarters, so that a flood
// of huge uploads cannot starve the ordinary requests (a 12k-token
// pre-tokenized prompt is about 77 KB) of a node.
const SmallBodyBytes = 1 << 20

// BodyBudget bounds the bytes of request bodies one process holds at
// once, over all its requests. MaxBodyBytes bounds each body alone, so
// without it N concurrent clients could make the process hold N times
// that; with it, a body that would go over the budget is refused at once
// (ErrBodyBudget) instead of read. Bytes are held from the moment a body
// is admitted until its BodyHold is released, which the edges do when the
// request's body buffer is released.
//
// A nil *BodyBudget admits everything. Its methods are safe for
// concurrent use.
type BodyBudget struct {
	limit   int64
	held    atomic.Int64
	refused atomic.Int64
}

// NewBodyBudget returns a budget of limit bytes, or nil (no budget) when
// limit is not positive.
func NewBodyBudget(limit int64) *BodyBudget {
	if limit <= 0 {
		return nil
	}
	return &BodyBudget{limit: limit}
}

// Limit is the budget in bytes (0 for a nil budget).
func (b *BodyBudget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Held is the body bytes held now.
func (b *BodyBudget) Held() int64 {
	if b == nil {
		return 0
	}
	return b.held.Load()
}

// Refused counts the bodies refused for want of budget so far.
func (b *BodyBudget) Refused() int64 {
	if b == nil {
		return 0
	}
	return b.refused.Load()
}

// take adds n bytes to the budget for a body that then holds total bytes,
// or reports false and takes nothing when that would go over the body's
// ceiling (the whole budget for a small body, three quarters for a
// large one).
func (b *BodyBudget) take(n, total int64) bool {
	ceiling := b.limit
	if total > SmallBodyBytes {
		ceiling -= b.limit / 4
	}
	for {
		h := b.held.Load()
		if h+n > ceiling {
			return false
		}
		if b.held.CompareAndSwap(h, h+n) {
			return true
		}
	}
}

// BodyHold is the share of a BodyBudget one body holds. The zero value
// holds nothing. It belongs to one request; Release may be called once
// the body's buffer is no longer used, and again without effect.
type BodyHold struct {
	b *BodyBudget
	n int64
}

// grow takes n more bytes for this body, counting a refusal when the
// budget cannot give them.
func (h *BodyHold) grow(b *BodyBudget, n int64) bool {
	if b == nil {
		return true
	}
	if !b.take(n, h.n+n) {
		b.refused.Add(1)
		return false
	}
	h.b, h.n = b, h.n+n
	return true
}

// Release gives the held bytes back.
func (h *BodyHold) Release() {
	if h == nil || h.b == nil {
		return
	}
	h.b.held.Add(-h.n)
	h.b, h.n = nil, 0
}

// Bytes is the bytes held.
func (h *BodyHold) Bytes() int64 { return h.n }

// MaxBufferedBodyBytes is the default BodyBudget of an edge process:
// sixteen bodies of the largest size (MaxBodyBytes), or thousands of
// ordinary ones (a 12k-token prompt is about 77 KB, held for its whole
// request, streams included). A process holding it all stays far below
// the memory of the hosts routers run on, while N abusive clients no
// longer cost N times MaxBodyBytes.
const MaxBufferedBodyBytes = 512 << 20

// ErrBudgetConfig reports a budget that cannot admit a body of the
// largest allowed size.
var ErrBudgetConfig = errors.New("oaiedge: invalid buffered body budget")

// NewEdgeBodyBudget is the budget of an edge configured with limit bytes
// (0: MaxBufferedBodyBytes; negative: none) and bodies of up to maxBody
// bytes. A budget whose large-body share (three quarters) is under
// maxBody is an error: the largest allowed body could never be read.
func NewEdgeBodyBudget(limit, maxBody int64) (*BodyBudget, error) {
	switch {
	case limit < 0:
		return nil, nil
	case limit == 0:
		limit = MaxBufferedBodyBytes
	}
	if limit-limit/4 < maxBody {
		return nil, fmt.Errorf("%w: %d bytes admit bodies of at most %d bytes (three quarters), under the body limit of %d; raise it to at least %d",
			ErrBudgetConfig, limit, limit-limit/4, maxBody, (maxBody*4+2)/3)
	}
	return NewBodyBudget(limit), nil
}
