package producer

import "time"

// Load is the pool's load as the relay knows it, shipped in heartbeats so
// that other DCs weigh a cache hit against the room left to use it.
type Load struct {
	// Engines is the number of engine ranks serving the pool.
	Engines int
	// ActiveRequests is the sum of in-flight requests over the ranks.
	ActiveRequests int64
	// PrefillTokens is the sum of prompt tokens waiting for prefill.
	PrefillTokens int64
	// DecodeBlocks is the sum of KV blocks held by active requests.
	DecodeBlocks int64
	// Utilization is a load figure in [0, 1]; 0 when unknown.
	Utilization float64
}

// SetLoad records the pool's current load for the next heartbeat.
func (p *Producer) SetLoad(l Load) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.load = l
}

// Beat queues a heartbeat on every feed, after every delta queued before
// it, carrying the load, the entry count and the current seq. A subscriber
// that has applied fewer deltas than the heartbeat's seq has a gap. now is
// the caller's clock reading, passed through for diagnostics.
func (p *Producer) Beat(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.stats.Heartbeats++
	p.fanout(Update{Kind: UpdateHeartbeat, Epoch: p.epoch, Seq: p.seq, Load: p.load, Entries: p.refs.Len(), At: now})
}
