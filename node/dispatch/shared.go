package dispatch

import (
	"sync"

	"github.com/kvrouter/kvrouter/routing/index"
)

// sharedNotice tells the operator, once, at the first request, that the
// shared-cache credit (KVConfig.SharedCacheMultiplier) has no source:
// kvrouter learns the shared store's blocks from the engines' KV events
// (routing.TierShared), and when no engine has reported one by then the
// credit changes no decision. Without this an operator who set the
// multiplier would believe it works. A later first report is not
// announced: the credit then simply applies.
type sharedNotice struct {
	once sync.Once
	idx  *index.Exact // nil in approximate mode
}

// check logs the notice at the first call when it applies.
func (n *sharedNotice) check(d *Dispatcher) {
	n.once.Do(func() {
		mult := d.cfg.KV.SharedCacheMultiplier
		if n.idx == nil || mult == 0 || n.idx.Stats().SharedPairs > 0 {
			return
		}
		d.log.Warn("no engine has reported a block on a shared KV tier: the shared-cache credit changes no decision until one does",
			"shared_cache_multiplier", mult, "media", "EXTERNAL, SHARED, REMOTE or NETWORK")
	})
}
