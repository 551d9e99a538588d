package filter

import (
	"math"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// Benchmarks compare the kinds at the same geometry: one million-block
// summary (2^18 cuckoo buckets: 2 MiB at 16 bits, 1.5 MiB compact) filled
// to 95% of its cuckoo slots, and Bloom filters sized for the same entries
// at the false-positive rate each cuckoo layout has at that load. Run all
// cases in one run with
//
//	go test -run '^$' -bench . ./relay/filter
const (
	benchBuckets = 1 << 18
	benchLoad    = 0.95
	chainLen     = 24
)

// benchCase is one benchmarked summary configuration.
type benchCase struct {
	name string
	cfg  Config
}

// benchCases lists the configurations this build can benchmark: both
// cuckoo layouts here, the Bloom filters in bloom_bench_test.go.
var benchCases = []benchCase{
	{name: "cuckoo", cfg: benchConfig(KindCuckoo)},
	{name: "cuckoo-compact", cfg: benchConfig(KindCuckooCompact)},
}

// benchEntries is the entry count at benchLoad.
var benchEntries = int(math.Floor(benchLoad * benchBuckets * slotsPerBucket))

// cuckooRate is the formula false-positive rate of cuckoo kind at
// benchLoad, which the Bloom cases are sized for.
func cuckooRate(kind Kind) float64 {
	return 1 - math.Pow(1-1/float64(uint64(1)<<kind.fingerprintWidth()-1), 2*slotsPerBucket*benchLoad)
}

// benchConfig returns the config of one benchmarked summary; a Bloom
// filter gets the rate of the 16-bit cuckoo filter.
func benchConfig(kind Kind) Config {
	return Config{
		Kind: kind, Capacity: benchEntries, TargetLoad: benchLoad, Seed: 1,
		BloomFPRate: cuckooRate(KindCuckoo),
	}
}

// filled returns a summary holding benchEntries random blocks, stored as
// chains of chainLen, and those blocks.
func filled(b *testing.B, cfg Config) (mutableSummary, []routing.SeqHash) {
	b.Helper()
	s, err := newSummary(cfg, newRand(1))
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
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			keys := randomHashes(newRand(3), benchEntries)
			s, _ := newSummary(bc.cfg, newRand(1))
			i := 0
			for b.Loop() {
				if i == len(keys) {
					b.StopTimer()
					s, _ = newSummary(bc.cfg, newRand(1))
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
	for _, bc := range benchCases {
		s, keys := filled(b, bc.cfg)
		b.Run(bc.name+"/hit", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if !s.Contains(keys[i%len(keys)]) {
					b.Fatal("false negative")
				}
				i++
			}
			reportSize(b, s)
		})
		b.Run(bc.name+"/miss", func(b *testing.B) {
			probes := randomHashes(newRand(4), 1<<20)
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
	for _, bc := range benchCases {
		s, keys := filled(b, bc.cfg)
		b.Run(bc.name, func(b *testing.B) {
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
	for _, bc := range benchCases {
		s, _ := filled(b, bc.cfg)
		b.Run(bc.name, func(b *testing.B) {
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

// BenchmarkFalsePositiveRate measures, per op, the false-positive rate of a
// summary at benchLoad over 10^6 fresh absent keys (a fixed seed, so every
// op measures the same keys) and reports it beside bits per entry: the two
// figures the kinds are chosen by. ns/op is the cost of the 10^6 probes.
func BenchmarkFalsePositiveRate(b *testing.B) {
	for _, bc := range benchCases {
		s, keys := filled(b, bc.cfg)
		skip := setOf(keys)
		b.Run(bc.name, func(b *testing.B) {
			var fp float64
			for b.Loop() {
				fp = measureFP(s, newRand(5), 1_000_000, skip)
			}
			b.ReportMetric(fp, "fp-rate")
			b.ReportMetric(s.FalsePositiveRate(), "fp-formula")
			reportSize(b, s)
		})
	}
}
