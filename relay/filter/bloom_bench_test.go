package filter

// init adds a Bloom filter sized for each cuckoo layout's false-positive
// rate at benchLoad, so each cuckoo case has a Bloom case at equal rate.
func init() {
	for _, kind := range []Kind{KindCuckoo, KindCuckooCompact} {
		cfg := benchConfig(KindBloom)
		cfg.BloomFPRate = cuckooRate(kind)
		benchCases = append(benchCases, benchCase{name: "bloom-at-" + kind.String(), cfg: cfg})
	}
}
