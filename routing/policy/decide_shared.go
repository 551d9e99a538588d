package policy

import "github.com/kvrouter/kvrouter/routing/index"

// sharedHits fills every candidate's SharedHits from the exact index's
// shared tier: the request's blocks that some engine stored in the DC's
// shared KV store, counted for each candidate at the positions beyond its
// own device prefix (index.HitsBeyond), which the kv cost model credits
// at KVConfig.SharedCacheMultiplier. A fleet whose engines report no
// shared tier costs one counter read.
func (d *Decider) sharedHits(sc *Scratch) {
	sc.shared = d.exact.SharedRanges(sc.Hashes, sc.shared[:0])
	if len(sc.shared) == 0 {
		return
	}
	for i := range sc.cands {
		c := &sc.cands[i]
		c.SharedHits = index.HitsBeyond(sc.shared, c.Overlap.Device)
	}
}
