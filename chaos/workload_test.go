package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
)

// op is one recorded client operation: a routed request of a session.
type op struct {
	client  int
	session string
	node    string
	call    int64 // ns since the history's base
	ret     int64
	// engine is the engine that served it; unknown marks a request that
	// failed after it may have reached a node.
	engine  string
	unknown bool
	status  int
	err     string
}

// history is the operations of one run, on one monotonic clock.
type history struct {
	base time.Time
	mu   sync.Mutex
	ops  []op
	// refused counts requests no node accepted (connection refused).
	refused atomic.Int64
}

func newHistory() *history { return &history{base: time.Now()} }

func (h *history) now() int64 { return int64(time.Since(h.base)) }

func (h *history) add(o op) {
	h.mu.Lock()
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

// client sends routed requests with session ids.
type client struct {
	id   int
	http *http.Client
	h    *history
}

func newClient(id int, h *history) *client {
	return &client{id: id, h: h, http: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableKeepAlives: false}}}
}

// route sends one request of session through m and records it. It
// returns the serving engine ("" when the request failed).
func (c *client) route(m *member, session string, seed int) string {
	tokens := make([]int, 48)
	for i := range tokens {
		tokens[i] = (seed*7919 + i*31) % 32000
	}
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": tokens, "max_tokens": 1})
	req, _ := http.NewRequest("POST", "http://"+m.http+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", session)
	o := op{client: c.id, session: session, node: m.id, call: c.h.now()}
	resp, err := c.http.Do(req)
	if err != nil {
		o.ret = c.h.now()
		if errors.Is(err, syscall.ECONNREFUSED) {
			c.h.refused.Add(1)
			return "" // nothing listened: the request reached no node
		}
		o.unknown, o.err = true, err.Error()
		c.h.add(o)
		return ""
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	o.ret, o.status = c.h.now(), resp.StatusCode
	switch {
	case rerr != nil:
		o.unknown, o.err = true, rerr.Error()
	case resp.StatusCode != http.StatusOK:
		// The session may have been bound before the request failed.
		o.unknown, o.err = true, fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
	default:
		o.engine = resp.Header.Get("X-Kvrouter-Worker")
		if o.engine == "" {
			o.unknown, o.err = true, "no X-Kvrouter-Worker header"
		}
	}
	c.h.add(o)
	return o.engine
}

// load is the concurrent workload of a run: clients routing sessions
// drawn from a fixed pool through the live members, until ctx ends.
type load struct {
	d        *dc
	h        *history
	sessions int
	clients  int
	seed     uint64
	// fresh is the share of requests that bind a new session (the rest
	// route one of the pool), so that binds keep reaching the leader
	// throughout a run.
	fresh float64
	// timeout bounds one request (default 10 s); partition scenarios
	// shorten it so that clients stuck on a minority move on.
	timeout time.Duration
}

func (l *load) run(ctx context.Context) {
	var wg sync.WaitGroup
	for ci := range l.clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(l.seed, uint64(ci)))
			c := newClient(ci, l.h)
			if l.timeout > 0 {
				c.http.Timeout = l.timeout
			}
			next := freshBase * (ci + 1)
			for ctx.Err() == nil {
				m := l.d.pick(rng)
				s := rng.IntN(l.sessions)
				if l.fresh > 0 && rng.Float64() < l.fresh {
					s, next = next, next+1
				}
				c.route(m, "s-"+strconv.Itoa(s), s)
			}
		})
	}
	wg.Wait()
}

// live is the members whose processes run.
func (d *dc) live() []*member {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*member
	for _, m := range d.members {
		if m.cmd != nil {
			out = append(out, m)
		}
	}
	return out
}

// freshBase spaces the clients' fresh session numbers apart.
const freshBase = 1_000_000

// pick draws one of the DC's members (the membership may change).
func (d *dc) pick(rng *rand.Rand) *member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.members[rng.IntN(len(d.members))]
}

// verifyAll routes every session that was served once more through each
// member and returns those whose binding moved or could not be read.
func verifyAll(t *testing.T, d *dc, h *history) (lost []string) {
	t.Helper()
	want := map[string]string{}
	for _, o := range h.ops {
		if !o.unknown && want[o.session] == "" {
			want[o.session] = o.engine
		}
	}
	// Each session is asked of every member: thousands of requests, sent by
	// a few clients at once (each one sequential, as porcupine's clients are).
	sessions := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		c := newClient(1000+w, h)
		wg.Go(func() {
			for s := range sessions {
				seed, _ := strconv.Atoi(s[2:])
				for _, m := range d.live() {
					var got string
					for attempt := 0; attempt < 5 && got == ""; attempt++ {
						got = c.route(m, s, seed)
						if got == "" {
							time.Sleep(200 * time.Millisecond)
						}
					}
					if got != want[s] {
						mu.Lock()
						lost = append(lost, fmt.Sprintf("%s: bound to %s, %s routed it to %q", s, want[s], m.id, got))
						mu.Unlock()
					}
				}
			}
		})
	}
	for s := range want {
		sessions <- s
	}
	close(sessions)
	wg.Wait()
	slices.Sort(lost)
	return lost
}

// seed is KVRTEST_CHAOS_SEED, or a fixed default; tests print it.
func seed() uint64 {
	if v, err := strconv.ParseUint(os.Getenv("KVRTEST_CHAOS_SEED"), 10, 64); err == nil {
		return v
	}
	return 20261129
}

// phase is KVRTEST_CHAOS_SECONDS (for make chaos), or def.
func phase(def time.Duration) time.Duration {
	if v, err := strconv.Atoi(os.Getenv("KVRTEST_CHAOS_SECONDS")); err == nil && v > 0 {
		return time.Duration(v) * time.Second
	}
	return def
}
