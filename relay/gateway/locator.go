package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Locator defaults.
const (
	// DefaultPositiveTTL caches "bound in DC x" for 2 s: a binding outlives
	// it by far (minutes of idle timeout), and a stale positive only sends
	// a request to x, which then serves it and keeps one home.
	DefaultPositiveTTL = 2 * time.Second
	// DefaultNegativeTTL caches "bound nowhere else" for 1 s. It is safe
	// because new sessions bind only in their hash home (doc.go), so no
	// other DC starts binding a session while this answer is cached.
	DefaultNegativeTTL = time.Second
	// DefaultMaxCacheEntries bounds the cache; it is cleared when full.
	DefaultMaxCacheEntries = 1 << 16
	// maxHomeAnswerBytes bounds a remote gateway's answer.
	maxHomeAnswerBytes = 4 << 10
)

// ErrLocate wraps a failure to ask another DC where a session is bound.
var ErrLocate = errors.New("gateway: session lookup failed")

// HomeAnswer is the JSON answer of GET /v1/sessions/{id}/home.
type HomeAnswer struct {
	Session string `json:"session"`
	DC      string `json:"dc"`
	Bound   bool   `json:"bound"`
	Engine  string `json:"engine,omitempty"`
	Version uint64 `json:"version,omitempty"`
}

// HTTPLocator is a SessionLocator that asks every remote gateway's
// /v1/sessions/{id}/home in parallel and caches the answer. When several
// DCs answer bound, the one Homes ranks first wins. It is also the
// Confirmer of a SummaryLocator, asking one DC. It is safe for concurrent
// use.
type HTTPLocator struct {
	remotes []Remote
	homes   Homes
	client  *http.Client
	cache   *locCache
}

var (
	_ SessionLocator = (*HTTPLocator)(nil)
	_ Confirmer      = (*HTTPLocator)(nil)
)

// NewHTTPLocator returns a locator over remotes; homes must rank the
// same DCs as the gateways' (NewHomes of every DC name). Zero TTLs take
// the defaults; client nil uses http.DefaultClient.
func NewHTTPLocator(remotes []Remote, homes Homes, client *http.Client, now func() time.Time, posTTL, negTTL time.Duration) *HTTPLocator {
	if client == nil {
		client = http.DefaultClient
	}
	return &HTTPLocator{remotes: remotes, homes: homes, client: client, cache: newLocCache(now, posTTL, negTTL)}
}

// Locate returns the other DC the session is bound in, from the cache or
// from the remote gateways. An error means no remote answered bound and
// at least one did not answer; errors are not cached.
func (l *HTTPLocator) Locate(ctx context.Context, session string) (string, bool, error) {
	if dc, ok, hit := l.cache.get(session); hit {
		return dc, ok, nil
	}
	dc, ok, err := l.ask(ctx, session)
	if err == nil || ok {
		l.cache.put(session, dc, ok)
	}
	return dc, ok, err
}

// Confirm implements Confirmer: it asks dc's gateway alone, uncached.
func (l *HTTPLocator) Confirm(ctx context.Context, dc, session string) (bool, error) {
	for _, r := range l.remotes {
		if r.DC == dc {
			return l.askOne(ctx, r, session)
		}
	}
	return false, fmt.Errorf("%w: dc %s is not a remote", ErrLocate, dc)
}

// locCache caches lookup answers: "bound in dc" for posTTL, "bound in no
// other DC" for negTTL. It is cleared when it holds maxEntries. It is safe
// for concurrent use.
type locCache struct {
	now            func() time.Time
	posTTL, negTTL time.Duration
	maxEntries     int
	mu             sync.Mutex
	m              map[string]located
}

// located is a cached answer.
type located struct {
	dc      string
	ok      bool
	expires time.Time
}

// newLocCache returns an empty cache; zero TTLs take the defaults.
func newLocCache(now func() time.Time, posTTL, negTTL time.Duration) *locCache {
	posTTL = cmp.Or(posTTL, DefaultPositiveTTL)
	negTTL = cmp.Or(negTTL, DefaultNegativeTTL)
	return &locCache{now: now, posTTL: posTTL, negTTL: negTTL, maxEntries: DefaultMaxCacheEntries, m: map[string]located{}}
}

// get returns a live cache entry.
func (c *locCache) get(session string) (string, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, hit := c.m[session]
	if !hit || !c.now().Before(e.expires) {
		return "", false, false
	}
	return e.dc, e.ok, true
}

// put caches an answer, clearing the cache when it is full.
func (c *locCache) put(session, dc string, ok bool) {
	ttl := c.negTTL
	if ok {
		ttl = c.posTTL
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.maxEntries {
		clear(c.m)
	}
	c.m[session] = located{dc: dc, ok: ok, expires: c.now().Add(ttl)}
}

// ask queries every remote gateway in parallel.
func (l *HTTPLocator) ask(ctx context.Context, session string) (string, bool, error) {
	dcs := make([]string, len(l.remotes))
	byDC := make(map[string]Remote, len(l.remotes))
	for i, r := range l.remotes {
		dcs[i], byDC[r.DC] = r.DC, r
	}
	return askEach(l.homes, session, dcs, func(dc string) (bool, error) {
		return l.askOne(ctx, byDC[dc], session)
	}, nil)
}

// lookupReply is one DC's answer to a session lookup.
type lookupReply struct {
	dc    string
	bound bool
	err   error
}

// askEach runs ask for every DC of dcs in parallel and returns the DC the
// session is bound in: when several are, the one homes prefers. When none
// is bound and some lookups failed, the error joins their errors. seen,
// when not nil, sees every reply.
func askEach(homes Homes, session string, dcs []string, ask func(dc string) (bool, error), seen func(lookupReply)) (string, bool, error) {
	replies := make(chan lookupReply, len(dcs))
	for _, dc := range dcs {
		go func() {
			bound, err := ask(dc)
			replies <- lookupReply{dc, bound, err}
		}()
	}
	var best string
	var errs []error
	for range dcs {
		rp := <-replies
		if seen != nil {
			seen(rp)
		}
		switch {
		case rp.err != nil:
			errs = append(errs, rp.err)
		case rp.bound && best == "":
			best = rp.dc
		case rp.bound:
			best = homes.Prefer(session, best, rp.dc)
		}
	}
	if best != "" {
		return best, true, nil
	}
	if len(errs) > 0 {
		return "", false, fmt.Errorf("%w: %w", ErrLocate, errors.Join(errs...))
	}
	return "", false, nil
}

// askOne asks one remote gateway.
func (l *HTTPLocator) askOne(ctx context.Context, r Remote, session string) (bool, error) {
	return askGateways(r, func(base string) (bool, error) { return l.askGateway(ctx, r.DC, base, session) })
}

// askGateway asks one of a remote DC's gateways.
func (l *HTTPLocator) askGateway(ctx context.Context, dc, base, session string) (bool, error) {
	var a HomeAnswer
	if err := getJSON(ctx, l.client, base+"/v1/sessions/"+url.PathEscape(session)+"/home", maxHomeAnswerBytes, &a); err != nil {
		return false, fmt.Errorf("dc %s: %w", dc, err)
	}
	return a.Bound, nil
}
