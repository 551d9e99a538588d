package producer

// Bloom summaries
//
// A Bloom filter cannot delete, so a block the pool drops stays set in the
// filter: RefSet counts it as stale, and it answers as a false positive
// until the filter is rebuilt from the exact set. Deltas carry only the
// words that adds changed, so removals cost nothing on the WAN until that
// rebuild, which is a new epoch and a full snapshot to every subscriber
// (they resubscribe at once on PRODUCER_CHANGED).
//
// The producer rebuilds after the batch that makes the stale entries
// reach Config.BloomRebuildShare of all the entries the filter holds
// (live and stale), or that makes its load (the same entries over its
// capacity) pass Config.GrowLoad. The load rule keeps the filter's random
// false-positive rate at or below the rate it was sized for. The share
// bounds the other kind: a stale entry is not a random false positive but
// a block the pool held a moment ago, which requests are likely to ask
// for again and which the filter reports present with certainty; at 0.25,
// at most a quarter of what the filter says is held has gone. A share
// rather than a period, because the producer reads no clock and because a
// share bounds that error whatever the churn: a pool whose blocks turn
// over once a minute is rebuilt (and re-sent as a snapshot) about every
// 20 seconds, an idle one never.
//
// The rebuilt filter keeps its capacity unless the live blocks alone take
// more than (1 - share) of GrowLoad of it; then it doubles, so that after
// a rebuild the filter has room for a share of stale entries before it is
// full again, and a growing pool does not rebuild on every batch.

// bloomRebuild reports whether a Bloom summary must be rebuilt now, and
// at which capacity.
func (p *Producer) bloomRebuild() (capacity int, ok bool) {
	live, stale, capacity := p.refs.Len(), p.refs.Stale(), p.refs.Capacity()
	full := p.loadFactor() > p.cfg.GrowLoad
	worn := stale > 0 && float64(stale) >= p.cfg.BloomRebuildShare*float64(live+stale)
	if !full && !worn {
		return 0, false
	}
	if float64(live) > (1-p.cfg.BloomRebuildShare)*p.cfg.GrowLoad*float64(capacity) {
		capacity = 2 * max(capacity, live)
	}
	return capacity, true
}
