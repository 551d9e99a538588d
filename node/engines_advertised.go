package node

import "github.com/kvrouter/kvrouter/node/dispatch"

var _ dispatch.Advertiser = engines{}

// RouterConfig implements dispatch.Advertiser: the router settings the
// incumbent cohort of the model's worker set advertised.
func (e engines) RouterConfig(model string) (map[string]string, bool) { return e.r.RouterConfig(model) }

// RouterConfigVersion implements dispatch.Advertiser.
func (e engines) RouterConfigVersion() uint64 { return e.r.RouterConfigVersion() }
