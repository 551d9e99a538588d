package declared

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// Probe failure reasons, the values of the reason label.
const (
	ReasonUnreachable   = "unreachable"
	ReasonUnhealthy     = "unhealthy"
	ReasonModel         = "model_not_served"
	ReasonBlockSize     = "block_size_mismatch"
	ReasonMetricsScrape = "metrics_scrape"
)

// errProbe carries a failure reason.
type errProbe struct {
	reason string
	err    error
}

func (e *errProbe) Error() string { return e.reason + ": " + e.err.Error() }
func (e *errProbe) Unwrap() error { return e.err }

func failed(reason string, format string, args ...any) error {
	return &errProbe{reason: reason, err: fmt.Errorf(format, args...)}
}

// prober polls one engine. Its fields are owned by its goroutine.
type prober struct {
	e    Engine
	cfg  *Config
	sink Sink

	model       string // resolved model name
	roleKnown   bool   // the role was declared or read (role.go)
	incarnation uint64
	lastStart   float64 // the last scraped process start time
	lastErr     string  // the last failure logged, to log once per change
}

// poll runs one probe: health, model, metrics; then card and heartbeat.
func (p *prober) poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if err := p.health(ctx); err != nil {
		return err
	}
	if err := p.resolveModel(ctx); err != nil {
		return err
	}
	p.resolveRole(ctx)
	pages, err := p.scrape(ctx)
	if err != nil {
		p.cfg.fail(ReasonMetricsScrape)
		p.cfg.Log.Debug("engine metrics unavailable", "engine", p.e.URL, "err", err)
	}
	kvBlocks, err := p.check(pages)
	if err != nil {
		return err
	}
	p.updateIncarnation(pages)
	card := p.e.card(p.model, kvBlocks, p.incarnation)
	if err := p.sink.Card(card); err != nil {
		return fmt.Errorf("declared: register %s: %w", p.e.URL, err)
	}
	return p.sink.Beat(p.heartbeat(card, pages))
}

func (p *prober) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.e.URL+path, nil)
	if err != nil {
		return nil, err
	}
	if p.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return nil, failed(ReasonUnreachable, "%s%s: %w", p.e.URL, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, failed(ReasonUnhealthy, "%s%s answered %s", p.e.URL, path, resp.Status)
	}
	return resp, nil
}

func (p *prober) health(ctx context.Context) error {
	resp, err := p.get(ctx, "/health")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return resp.Body.Close()
}

// resolveModel checks the declared model against /v1/models once, or
// takes the first listed model when none is declared.
func (p *prober) resolveModel(ctx context.Context) error {
	if p.model != "" {
		return nil
	}
	resp, err := p.get(ctx, "/v1/models")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return failed(ReasonUnhealthy, "%s/v1/models: %w", p.e.URL, err)
	}
	ids := make([]string, len(list.Data))
	for i, m := range list.Data {
		ids[i] = m.ID
	}
	want := p.e.Ranks[0].Model
	switch {
	case len(ids) == 0:
		return failed(ReasonModel, "%s serves no model", p.e.URL)
	case want == "":
		p.model = ids[0]
	case slices.Contains(ids, want):
		p.model = want
	default:
		return failed(ReasonModel, "%s does not serve model %q (it serves %q)", p.e.URL, want, ids)
	}
	return nil
}

// scrape reads each distinct metrics page of the engine's ranks; pages[r]
// is nil for a rank whose page is off or failed.
func (p *prober) scrape(ctx context.Context) ([]*Page, error) {
	pages := make([]*Page, len(p.e.Ranks))
	byURL := map[string]*Page{}
	var errs []error
	for r, sp := range p.e.Ranks {
		u := sp.MetricsURL()
		if u == "" {
			continue
		}
		pg, ok := byURL[u]
		if !ok {
			var err error
			if pg, err = Scrape(ctx, p.cfg.Client, u, p.cfg.APIKey); err != nil {
				errs = append(errs, err)
			}
			byURL[u] = pg
		}
		pages[r] = pg
	}
	return pages, errors.Join(errs...)
}

// check refuses a block size mismatch and returns the capacity to declare.
func (p *prober) check(pages []*Page) (uint64, error) {
	declared := p.e.Ranks[0]
	kv := declared.KVBlocks
	for _, pg := range pages {
		if pg == nil {
			continue
		}
		if pg.BlockSize != 0 && pg.BlockSize != declared.BlockSize {
			return 0, failed(ReasonBlockSize, "%s reports KV block size %d, declared block-size=%d", p.e.URL, pg.BlockSize, declared.BlockSize)
		}
		kv = cmp.Or(kv, pg.KVBlocks)
	}
	return cmp.Or(kv, DefaultKVBlocks), nil
}

// updateIncarnation follows the engine's process start time: a different
// start time than the last one scraped is a restart. The first start time
// seen does not change the incarnation, so an engine whose first scrape
// failed is not taken for restarted when a later one succeeds.
func (p *prober) updateIncarnation(pages []*Page) {
	var start float64
	for _, pg := range pages {
		if pg != nil && pg.StartTime != 0 {
			start = pg.StartTime
			break
		}
	}
	switch {
	case p.incarnation == 0 && start != 0:
		p.incarnation = uint64(start * 1000)
	case p.incarnation == 0:
		p.incarnation = 1
	case start != 0 && p.lastStart != 0 && start != p.lastStart:
		p.incarnation = uint64(start * 1000)
	}
	if start != 0 {
		p.lastStart = start
	}
}

func (p *prober) heartbeat(c *kvrpb.WorkerCard, pages []*Page) *kvrpb.Heartbeat {
	hb := &kvrpb.Heartbeat{EngineId: c.EngineId, CardChecksum: c.Checksum, Incarnation: c.Incarnation,
		UnixNanos: time.Now().UnixNano()}
	for r, pg := range pages {
		l := &kvrpb.RankLoad{Rank: uint32(r), KvTotalBlocks: c.TotalKvBlocks}
		if pg != nil {
			f := pg.Ranks[uint32(r)]
			l.Running, l.Waiting = uint32(f.Running), uint32(f.Waiting)
			if f.HasUsage {
				l.KvUsedBlocks = uint64(f.KVUsage * float64(c.TotalKvBlocks))
				l.ActiveDecodeBlocks = l.KvUsedBlocks
			}
		}
		hb.Loads = append(hb.Loads, l)
	}
	return hb
}

// run polls until ctx ends.
func (p *prober) run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		p.report(p.poll(ctx))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// report counts a failure and logs each change of outcome once.
func (p *prober) report(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
		var pe *errProbe
		if errors.As(err, &pe) {
			p.cfg.fail(pe.reason)
		}
	}
	if msg == p.lastErr {
		return
	}
	switch {
	case err == nil:
		p.cfg.Log.Info("declared engine healthy", "engine", p.e.URL, "worker", uint64(p.e.ID), "model", p.model)
	default:
		p.cfg.Log.Warn("declared engine not routable", "engine", p.e.URL, "worker", uint64(p.e.ID), "err", err)
	}
	p.lastErr = msg
}
