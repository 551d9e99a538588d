package service

import (
	"context"
	"errors"
	"time"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/relay/follow"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// feed reads the DC's ownership change stream and hands each batch's
// changes to the producers of their pools, until ctx ends.
//
// The stream carries the whole DC, by engine rank; an engine's pool is its
// model, known from its card. A change of an engine whose card has not
// arrived yet goes to the only pool when there is one; with several pools
// it is counted (kvrouter_relay_unmapped_changes_total) and dropped, and the next snapshot of the
// stream (a reconnect, or the node's ring overrun) repairs the summary.
// Removals of unknown engines go to every pool, where removing what a
// pool does not hold is a counted no-op. A snapshot arrives as a replacing
// batch, which every pool gets (its part may be empty: the pool then holds
// nothing) and applies as a difference. Session changes go to the session
// summary.
func (r *Relay) feed(ctx context.Context, reg *fleet.Registry) {
	for {
		b, err := r.src.Next(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, follow.ErrClosed) {
				r.log.Error("ownership stream ended", "err", err)
			}
			return
		}
		parts := r.split(reg, b.Changes)
		for model, p := range r.producers {
			changes, ok := parts[model]
			if !ok && !b.Replace {
				continue
			}
			if err := p.Apply(producer.Batch{Index: b.Index, Changes: changes, Replace: b.Replace}); err != nil {
				r.log.Warn("summary refused a batch", "model", model, "index", b.Index, "err", err)
			}
		}
		r.feedSessions(b)
	}
}

// feedSessions applies a batch's session changes to the session summary;
// a replacing batch is applied even without any, since it then says that
// no session is bound.
func (r *Relay) feedSessions(b producer.Batch) {
	if len(b.Sessions) == 0 && !b.Replace {
		return
	}
	if err := r.sessions.Apply(b.SessionBatch()); err != nil {
		r.log.Warn("session summary refused a batch", "index", b.Index, "err", err)
	}
}

// split sorts one batch's changes by pool.
func (r *Relay) split(reg *fleet.Registry, changes []producer.Change) map[string][]producer.Change {
	out := map[string][]producer.Change{}
	models := map[routing.WorkerID]string{}
	for _, e := range reg.Engines() {
		models[e.ID] = e.Model
	}
	only := ""
	if len(r.producers) == 1 {
		for m := range r.producers {
			only = m
		}
	}
	for _, c := range changes {
		m, known := models[c.Worker.ID]
		switch {
		case known && r.producers[m] != nil:
			out[m] = append(out[m], c)
		case known:
			// An engine of a model the relay does not summarise.
		case only != "":
			out[only] = append(out[only], c)
		case c.Kind != producer.Stored:
			for m := range r.producers {
				out[m] = append(out[m], c)
			}
		default:
			r.unmapped.Add(1)
		}
	}
	return out
}

// loads publishes each pool's load (from the engines' heartbeats) with
// the summaries' heartbeats, and records the DC's total for the gateway,
// every HeartbeatInterval.
func (r *Relay) loads(ctx context.Context, reg *fleet.Registry) {
	t := time.NewTicker(r.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var sum producer.Load
		for model, p := range r.producers {
			l := poolLoad(reg, model)
			p.SetLoad(l)
			sum.Engines += l.Engines
			sum.ActiveRequests += l.ActiveRequests
			sum.PrefillTokens += l.PrefillTokens
			sum.DecodeBlocks += l.DecodeBlocks
			sum.Utilization = max(sum.Utilization, l.Utilization)
		}
		r.load.Store(&sum)
	}
}

// poolLoad sums the reported loads of a model's ranks; utilization is the
// share of their KV capacity held by active requests.
func poolLoad(reg *fleet.Registry, model string) producer.Load {
	var l producer.Load
	var capacity int64
	for _, w := range reg.Workers(model) {
		l.Engines++
		capacity += int64(w.TotalBlocks)
		if rl, ok := reg.Load(w.Worker); ok {
			l.ActiveRequests += rl.ActiveRequests
			l.PrefillTokens += rl.PrefillTokens
			l.DecodeBlocks += rl.DecodeBlocks
		}
	}
	if capacity > 0 {
		l.Utilization = min(1, float64(l.DecodeBlocks)/float64(capacity))
	}
	return l
}
