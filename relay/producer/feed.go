package producer

import (
	"time"

	"github.com/kvrouter/kvrouter/internal/failpoint"
)

// UpdateKind says what an Update carries.
type UpdateKind uint8

// The update kinds.
const (
	// UpdateDelta carries one encoded delta; its Seq is the previous
	// update's Seq + 1 within the feed's epoch.
	UpdateDelta UpdateKind = iota + 1
	// UpdateHeartbeat carries load and the producer's seq when it was
	// queued; it does not advance Seq.
	UpdateHeartbeat
)

// Update is one message of a feed after its snapshot. Delta is shared by
// every feed and must not be modified.
type Update struct {
	Kind  UpdateKind
	Epoch uint64
	Seq   uint64
	// Delta is the filter.Delta encoding (UpdateDelta).
	Delta []byte
	// Load and Entries describe the pool (UpdateHeartbeat).
	Load    Load
	Entries int
	// At is the time passed to Beat (UpdateHeartbeat).
	At time.Time
}

// Feed is one subscriber's view: a barrier snapshot at (Epoch, Seq) and a
// bounded queue of the updates after it. A feed ends, and its channel is
// closed, when it lags, the producer changes or closes, or the subscriber
// calls Close; Err then says which.
type Feed struct {
	// Epoch and Seq tag the snapshot: the first delta is Seq+1.
	Epoch, Seq uint64
	// Snapshot is the filter encoding; shared, must not be modified.
	Snapshot []byte
	p        *Producer
	c        chan Update
	err      error
}

// Updates returns the channel of updates; it is closed when the feed ends.
func (f *Feed) Updates() <-chan Update { return f.c }

// Err returns why the feed ended; it is valid once Updates is closed.
func (f *Feed) Err() error {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	return f.err
}

// Close unsubscribes; Err becomes ErrClosed unless the feed already ended.
func (f *Feed) Close() {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	f.p.endFeed(f, ErrClosed)
}

// Subscribe returns a feed whose snapshot is the summary after the last
// published delta. Taking the snapshot and registering the feed happen under
// one lock, so no delta falls between them.
func (p *Producer) Subscribe() (*Feed, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	snap, err := p.snapshot()
	if err != nil {
		return nil, err
	}
	f := &Feed{Epoch: p.epoch, Seq: p.seq, Snapshot: snap, p: p, c: make(chan Update, p.cfg.QueueLen)}
	p.feeds[f] = struct{}{}
	p.stats.Snapshots++
	p.stats.SnapshotBytes += uint64(len(snap))
	return f, nil
}

// publish turns the buckets (or Bloom words) changed since the last
// publication into one delta, assigns it the next seq and queues it on every feed.
func (p *Producer) publish() {
	failpoint.Inject(failpoint.RelayBeforePublish)
	d := p.summary.TakeChanges()
	// A Bloom insert whose bits were all set already changes no word but
	// the entry count, which the encoding carries: it is published too,
	// so that a subscriber's copy stays byte-equal.
	if len(d.Images) == 0 && d.Count == p.count {
		return
	}
	data, err := d.MarshalBinary()
	if err != nil || len(data) > p.cfg.MaxDeltaBytes {
		// The delta is not shipped, so the sequence space must not
		// continue from it: a new epoch, and every subscriber resyncs.
		p.stats.Resyncs++
		p.startEpoch()
		p.endFeeds(ErrResync)
		return
	}
	p.seq++
	p.count = d.Count
	p.stats.Deltas++
	p.stats.DeltaBytes += uint64(len(data))
	p.stats.DeltaImages += uint64(len(d.Images))
	p.fanout(Update{Kind: UpdateDelta, Epoch: p.epoch, Seq: p.seq, Delta: data})
}

// fanout queues u on every feed, ending the feeds whose queue is full.
func (p *Producer) fanout(u Update) {
	for f := range p.feeds {
		select {
		case f.c <- u:
		default:
			p.stats.Lagged++
			p.endFeed(f, ErrLagged)
		}
	}
}

// endFeeds ends every feed with err.
func (p *Producer) endFeeds(err error) {
	for f := range p.feeds {
		p.endFeed(f, err)
	}
}

// endFeed ends f with err if it is still live; p.mu is held.
func (p *Producer) endFeed(f *Feed, err error) {
	if _, ok := p.feeds[f]; !ok {
		return
	}
	delete(p.feeds, f)
	f.err = err
	close(f.c)
}
