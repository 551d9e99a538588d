package fleet

import (
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// DeclaredSink registers the engines the operator declares (static
// entries or DNS discovery, fleet/declared) in the plane's registry. Such
// an engine answers no snapshot request: its index state belongs to its
// own KV-event source (fleet/vllmevents), which clears and replays it
// when the engine restarts or when the state moved under it (an engine
// that expired had its blocks dropped). It is safe for concurrent use.
type DeclaredSink struct{ p *Plane }

// DeclaredSink returns the plane's sink for declared engines.
func (p *Plane) DeclaredSink() DeclaredSink { return DeclaredSink{p} }

// Card registers or refreshes a declared engine.
func (s DeclaredSink) Card(c *kvrpb.WorkerCard) error {
	_, err := s.p.register(c, FromDeclared)
	return err
}

// Beat reports a declared engine's load and refreshes its liveness.
func (s DeclaredSink) Beat(h *kvrpb.Heartbeat) error { return s.p.beat(h, FromDeclared) }

// Reserve declares, before the probe registers it, that a statically
// declared engine owns id and url, so that no engine's own card can claim
// either (Registry.Reserve).
func (s DeclaredSink) Reserve(id routing.WorkerID, url string) { s.p.reg.Reserve(id, url) }

// Leave removes an engine the declarations no longer list.
func (s DeclaredSink) Leave(id routing.WorkerID, incarnation uint64) {
	if _, ok := s.p.reg.Deregister(id, incarnation, FromDeclared); ok {
		s.p.log.Info("declared engine left", "worker", uint64(id))
	}
}
