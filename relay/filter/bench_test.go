package filter

import (
	"math"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// Benchmarks compare the kinds at the same geometry: one million-block
// summary (2^18 cuckoo buckets, 2 MiB) filled to 95% of its cuckoo slots,
// and a Bloom filter sized for the same entries at the false-positive rate
// the cuckoo filter has at that load. Run both kinds in one run with
//
//	go test -run '^$' -bench . ./relay/filter
const (
	benchBuckets = 1 << 18
	benchLoad    = 0.95
	chainLen     = 24
)

// benchKinds lists the kinds this build can benchmark.
var benchKinds = []Kind{KindCuckoo}

// benchEntries is the entry count at benchLoad.
var benchEntries = int(math.Floor(benchLoad * benchBuckets * slotsPerBucket))

// benchConfig returns the config of one benchmarked summary.
func benchConfig(kind Kind) Config {
	return Config{
		Kind: kind, Capacity: benchEntries, TargetLoad: benchLoad, Seed: 1,
		BloomFPRate: 1 - math.Pow(1-1/float64(1<<fingerprintBits-1), 2*slotsPerBucket*benchLoad),
	}
}

// filled returns a summary holding benchEntries random blocks, stored as
// chains of chainLen, and those blocks.
func filled(b *testing.B, kind Kind) (mutableSummary, []routing.SeqHash) {
	b.Helper()
	s, err := newSummary(benchConfig(kind), newRand(1))
	if err != nil {
		b.Fatal(err)
	}
	keys := randomHashes(newRand(2), benchEntries)
	for _, h := range keys {
		if err := s.insert(h); err != nil {
			b.Fatal(err)
		}
	}
	return s, keys
}

// reportSize reports bits per entry, the figure the summaries are sized by.
func reportSize(b *testing.B, s Summary) {
	b.ReportMetric(float64(8*s.SizeBytes())/float64(s.Len()), "bits/entry")
}

// BenchmarkInsert measures inserts averaged over filling an empty summary
// to benchLoad, the range a producer lives in.
func BenchmarkInsert(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind.String(), func(b *testing.B) {
			keys := randomHashes(newRand(3), benchEntries)
			s, _ := newSummary(benchConfig(kind), newRand(1))
			i := 0
			for b.Loop() {
				if i == len(keys) {
					b.StopTimer()
					s, _ = newSummary(benchConfig(kind), newRand(1))
					i = 0
					b.StartTimer()
				}
				if err := s.insert(keys[i]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkLookup measures Contains on present blocks (hit) and on random
// absent ones (miss), and reports the measured false-positive rate.
func BenchmarkLookup(b *testing.B) {
	for _, kind := range benchKinds {
		s, keys := filled(b, kind)
		b.Run(kind.String()+"/hit", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if !s.Contains(keys[i%len(keys)]) {
					b.Fatal("false negative")
				}
				i++
			}
			reportSize(b, s)
		})
		b.Run(kind.String()+"/miss", func(b *testing.B) {
			probes := randomHashes(newRand(4), 1<<16)
			hits, i := 0, 0
			for b.Loop() {
				if s.Contains(probes[i&(len(probes)-1)]) {
					hits++
				}
				i++
			}
			b.ReportMetric(float64(hits)/float64(i), "fp-rate")
			reportSize(b, s)
		})
	}
}

// BenchmarkContainsPrefix measures the cross-DC search primitive on a
// request of chainLen blocks that are all present, the worst case: every
// block is probed.
func BenchmarkContainsPrefix(b *testing.B) {
	for _, kind := range benchKinds {
		s, keys := filled(b, kind)
		b.Run(kind.String(), func(b *testing.B) {
			chains := len(keys) / chainLen
			i := 0
			for b.Loop() {
				c := keys[(i%chains)*chainLen:][:chainLen]
				if s.ContainsPrefix(c) != chainLen {
					b.Fatal("false negative")
				}
				i++
			}
			reportSize(b, s)
		})
	}
}

// BenchmarkMarshal measures encoding a full snapshot of the summary.
func BenchmarkMarshal(b *testing.B) {
	for _, kind := range benchKinds {
		s, _ := filled(b, kind)
		b.Run(kind.String(), func(b *testing.B) {
			var n int
			for b.Loop() {
				data, err := s.MarshalBinary()
				if err != nil {
					b.Fatal(err)
				}
				n = len(data)
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}
