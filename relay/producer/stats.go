package producer

import "github.com/kvrouter/kvrouter/relay/filter"

// Stats are the producer's counters since it was created. Counters only
// grow except the gauges, which are marked.
type Stats struct {
	// Epoch and Seq are the current publication position (gauges).
	Epoch, Seq uint64
	// Ranks, Blocks and Contributions are gauges: ranks holding at least
	// one block, distinct blocks, and (rank, block) pairs.
	Ranks, Blocks, Contributions int
	// Omitted is the number of held blocks missing from the summary
	// (gauge; non-zero only between a failed insert and the rebuild).
	Omitted int
	// Stale is the number of removed blocks a Bloom summary still holds
	// (gauge; 0 for cuckoo summaries, which delete).
	Stale int
	// Kind, SizeBytes and LoadFactor describe the summary (gauges); the
	// load of a Bloom summary is its entries, stale ones included, over
	// the capacity it was sized for.
	Kind       filter.Kind
	SizeBytes  int
	LoadFactor float64
	// Subscribers is the number of live feeds (gauge).
	Subscribers int
	// Events counts block events applied (one per hash, or one per change
	// without hashes).
	Events uint64
	// UnknownRemovals counts removals of blocks the rank did not hold.
	UnknownRemovals uint64
	// Inconsistencies counts disagreements between the rank sets and the
	// reference counts; always 0 unless there is a bug.
	Inconsistencies uint64
	// Deltas, DeltaImages and DeltaBytes count publications.
	Deltas, DeltaImages, DeltaBytes uint64
	// Snapshots and SnapshotBytes count subscriptions served.
	Snapshots, SnapshotBytes uint64
	// Replaces counts replacing batches; ReplaceDropped and ReplaceStored
	// count the (rank, block) pairs they dropped and stored, their
	// difference from what was held.
	Replaces, ReplaceDropped, ReplaceStored uint64
	// Heartbeats, Lagged, Resyncs and Rebuilds count those events.
	Heartbeats, Lagged, Resyncs, Rebuilds uint64
}

// Stats returns a copy of the counters.
func (p *Producer) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Epoch, s.Seq = p.epoch, p.seq
	s.Ranks, s.Blocks = len(p.owners), p.refs.Len()
	s.Omitted = p.refs.Omitted()
	s.Stale = p.refs.Stale()
	s.Kind, s.SizeBytes, s.LoadFactor = p.summary.Kind(), p.summary.SizeBytes(), p.loadFactor()
	s.Subscribers = len(p.feeds)
	return s
}
