package index

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// BenchmarkApproxRecordFind routes 24-block requests over 32 workers with
// a TTL index: one op is a FindMatches plus the Record of the decision.
// Requests share one of 64 prompts of 8 blocks, so lookups hit.
func BenchmarkApproxRecordFind(b *testing.B) {
	a, err := NewApprox(ApproxConfig{})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	reqs := make([][]routing.SeqHash, 4096)
	for i := range reqs {
		ls := make([]routing.LocalHash, 24)
		for j := range ls {
			ls[j] = routing.LocalHash(r.Uint64())
			if j < 8 {
				ls[j] = routing.LocalHash(uint64(i%64)<<8 | uint64(j))
			}
		}
		reqs[i] = routing.SeqHashes(nil, ls)
	}
	now := time.Unix(0, 0)
	dst := make([]routing.Match, 0, 32)
	i := 0
	for b.Loop() {
		q := reqs[i&4095]
		dst = a.FindMatches(q, now, dst[:0])
		w := routing.Worker{ID: routing.WorkerID(i % 32)}
		if len(dst) > 0 {
			w = dst[0].Worker
		}
		if _, err := a.Record(w, q, now); err != nil {
			b.Fatal(err)
		}
		now = now.Add(time.Millisecond)
		i++
	}
}
