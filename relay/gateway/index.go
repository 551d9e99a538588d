package gateway

import (
	"context"
	"time"

	"github.com/kvrouter/kvrouter/relay/consumer"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// LocalIndex answers the exact local prefix depth: how many leading
// blocks of hashes some engine of this DC serving model holds. It is
// called concurrently from request goroutines and must not block on I/O.
type LocalIndex interface {
	Depth(model string, hashes []routing.SeqHash) int
}

// RemoteIndex answers remote prefix depths per DC; *consumer.Consumer
// implements it. It is called concurrently and must not block on I/O.
type RemoteIndex interface {
	// Query returns every remote lane's depth (for /v1/route/explain).
	Query(dst []consumer.Result, domain producer.Domain, hs []routing.SeqHash, now time.Time) []consumer.Result
	// Best returns the lane that gains most under o above minGain, which is
	// consumer.BestOf over Query's results (the serving path's question,
	// answered with fewer probes).
	Best(domain producer.Domain, hs []routing.SeqHash, now time.Time, o consumer.Objective, minGain float64) (consumer.Result, float64, bool)
}

// SessionLocator answers whether a session is bound in another DC, and
// which one. ok false with a nil error means bound in no other DC. It is
// called concurrently and may do network I/O bounded by ctx.
type SessionLocator interface {
	Locate(ctx context.Context, session string) (dc string, ok bool, err error)
}

// Refcounter is the exact-ownership read of a pool's producer:
// *producer.Producer implements it.
type Refcounter interface {
	Refs(h routing.SeqHash) int
}

// RefsIndex is a LocalIndex over the producers of the local pools, one
// per model: the depth is the number of leading blocks with a non-zero
// reference count. Its map is read-only after construction.
type RefsIndex map[string]Refcounter

var (
	_ LocalIndex  = RefsIndex(nil)
	_ RemoteIndex = (*consumer.Consumer)(nil)
	_ Refcounter  = (*producer.Producer)(nil)
)

// Depth scans from the first block: the ownership is exact, so the first
// absent block ends the prefix, and a linear scan never overshoots a hole
// the way a bisection could.
func (x RefsIndex) Depth(model string, hashes []routing.SeqHash) int {
	rc := x[model]
	if rc == nil {
		return 0
	}
	for i, h := range hashes {
		if rc.Refs(h) == 0 {
			return i
		}
	}
	return len(hashes)
}
