package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/relay/consumer"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// Confirmer is the authoritative session lookup in one other DC: whether
// its router cluster holds a binding of session now. HTTPLocator
// implements it over the DC's GET /v1/sessions/{id}/home. It is called
// concurrently and may do network I/O bounded by ctx.
type Confirmer interface {
	Confirm(ctx context.Context, dc, session string) (bool, error)
}

// Session lookup outcomes, the labels of Metrics.SessionLookups: one per
// remote DC per uncached Locate of a SummaryLocator.
const (
	// LookupSkipped: the DC's session lane is ready, fresh and says
	// absent, so the DC was not asked.
	LookupSkipped = "skipped"
	// LookupConfirmed: the lane says probably present and the DC
	// confirmed the binding.
	LookupConfirmed = "confirmed"
	// LookupFalsePositive: the lane says probably present and the DC
	// answered not bound (a filter false positive, a binding that just
	// ended, or one past its idle deadline and not yet expired).
	LookupFalsePositive = "false_positive"
	// LookupUnsummarised: the lane is missing, not ready or stale, so
	// the DC was asked.
	LookupUnsummarised = "unsummarised"
	// LookupFailed: the DC was asked and did not answer.
	LookupFailed = "failed"
)

// SummaryLocator is a SessionLocator that reads the other DCs' published
// session summaries (their session lanes, producer.SessionDomain, in the
// RemoteIndex) before it asks anyone: a DC whose lane is ready, no staler
// than MaxStaleness and says absent is not asked; every other DC is asked
// through the Confirmer, in parallel. Answers that took a lookup are
// cached like HTTPLocator's (positive 2 s, negative 1 s); answers from the
// summaries alone are not, since the summaries are fresher than a cache.
// See doc.go, Sessions, for why a summary that says absent may be
// trusted. It is safe for concurrent use: the lanes are read through the
// RemoteIndex, and Locate starts one goroutine per DC it asks and waits
// for all of them (HTTPLocator bounds each by ControlTimeout).
type SummaryLocator struct {
	remotes      []Remote
	homes        Homes
	index        RemoteIndex
	confirm      Confirmer
	maxStaleness time.Duration
	now          func() time.Time
	cache        *locCache
	metrics      atomic.Pointer[Metrics]
}

var _ SessionLocator = (*SummaryLocator)(nil)

// SummaryLocatorConfig configures a SummaryLocator.
type SummaryLocatorConfig struct {
	// Remotes are the DCs that may hold a binding; Homes ranks every DC
	// of the federation (NewHomes), to settle two bindings.
	Remotes []Remote
	Homes   Homes
	// Index holds the session lanes (the relay's consumer).
	Index RemoteIndex
	// Confirm asks one DC (HTTPLocator).
	Confirm Confirmer
	// MaxStaleness is how old a lane may be and still skip a lookup;
	// zero takes DefaultMaxStaleness, the prefix policy's bound.
	MaxStaleness time.Duration
	// Now is the clock (staleness, cache expiry).
	Now func() time.Time
	// PositiveTTL and NegativeTTL cache confirmed answers; zero takes
	// DefaultPositiveTTL and DefaultNegativeTTL.
	PositiveTTL, NegativeTTL time.Duration
}

// ErrLocatorConfig is returned for a SummaryLocatorConfig without its
// index, confirmer or clock.
var ErrLocatorConfig = errors.New("gateway: invalid session locator config")

// NewSummaryLocator returns a locator over cfg.
func NewSummaryLocator(cfg SummaryLocatorConfig) (*SummaryLocator, error) {
	switch {
	case cfg.Index == nil || cfg.Confirm == nil || cfg.Now == nil:
		return nil, fmt.Errorf("%w: index, confirmer and clock are required", ErrLocatorConfig)
	case cfg.MaxStaleness < 0:
		return nil, fmt.Errorf("%w: max staleness %v", ErrLocatorConfig, cfg.MaxStaleness)
	case cfg.MaxStaleness == 0:
		cfg.MaxStaleness = DefaultMaxStaleness
	}
	return &SummaryLocator{remotes: cfg.Remotes, homes: cfg.Homes, index: cfg.Index, confirm: cfg.Confirm,
		maxStaleness: cfg.MaxStaleness, now: cfg.Now, cache: newLocCache(cfg.Now, cfg.PositiveTTL, cfg.NegativeTTL)}, nil
}

// SetMetrics makes the locator count its lookups in m (the gateway's,
// Gateway.Metrics, which exists only once the gateway that uses the
// locator is built). Before it is called nothing is counted.
func (l *SummaryLocator) SetMetrics(m *Metrics) { l.metrics.Store(m) }

// Locate implements SessionLocator: from the cache, else the summaries
// and the confirming lookups they call for. An error means no DC was
// found bound and at least one asked DC did not answer.
func (l *SummaryLocator) Locate(ctx context.Context, session string) (string, bool, error) {
	if dc, ok, hit := l.cache.get(session); hit {
		return dc, ok, nil
	}
	ask := l.toAsk(session)
	if len(ask) == 0 {
		return "", false, nil
	}
	dc, ok, err := l.askAll(ctx, session, ask)
	if err == nil || ok {
		l.cache.put(session, dc, ok)
	}
	return dc, ok, err
}

// toAsk returns the remote DCs that must be asked, each with whether its
// lane said "probably present", and counts the skipped ones.
func (l *SummaryLocator) toAsk(session string) map[string]bool {
	hs := [1]routing.SeqHash{producer.SessionHash(session)}
	lanes := map[string]consumer.Result{}
	for _, r := range l.index.Query(nil, producer.SessionDomain, hs[:], l.now()) {
		lanes[r.Pool.DC] = r
	}
	ask := make(map[string]bool, len(l.remotes))
	for _, rm := range l.remotes {
		r, ok := lanes[rm.DC]
		switch {
		case !ok || !r.Ready || r.Staleness > l.maxStaleness:
			ask[rm.DC] = false
		case r.Depth > 0:
			ask[rm.DC] = true
		default:
			l.count(LookupSkipped)
		}
	}
	return ask
}

// askAll confirms with every DC of ask in parallel; when several are
// bound, the one Homes prefers wins.
func (l *SummaryLocator) askAll(ctx context.Context, session string, ask map[string]bool) (string, bool, error) {
	dcs := make([]string, 0, len(ask))
	for dc := range ask {
		dcs = append(dcs, dc)
	}
	return askEach(l.homes, session, dcs, func(dc string) (bool, error) {
		return l.confirm.Confirm(ctx, dc, session)
	}, func(rp lookupReply) { l.count(outcome(ask[rp.dc], rp.bound, rp.err)) })
}

// outcome labels one lookup.
func outcome(summarised, bound bool, err error) string {
	switch {
	case err != nil:
		return LookupFailed
	case !summarised:
		return LookupUnsummarised
	case bound:
		return LookupConfirmed
	}
	return LookupFalsePositive
}

// count adds one lookup outcome to the metrics, once they are set.
func (l *SummaryLocator) count(outcome string) {
	if m := l.metrics.Load(); m != nil {
		m.SessionLookups.WithLabelValues(outcome).Inc()
	}
}
