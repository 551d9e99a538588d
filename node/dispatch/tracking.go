package dispatch

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// hashes computes the request's block hashes into sc and, when track is
// set, its keyed tracking identities: Route's passes that book at once
// set it; Select, Explain and the admission queue's passes do not.
func (d *Dispatcher) hashes(sc *policy.Scratch, r *Request, track bool) error {
	if err := hash(sc, r); err != nil || !track {
		return err
	}
	return d.trackHash(sc, r)
}

// trackHash computes the request's keyed tracking identities when the
// dispatcher has a tracking key (--router-tracking-hash keyed-xxh3-v1):
// the load tracker then books those, while the indexes keep matching the
// public hashes in sc.Hashes, which are what the engines' KV events carry.
// Text prompts are not booked by hash, so they need none.
func (d *Dispatcher) trackHash(sc *policy.Scratch, r *Request) error {
	if d.cfg.TrackingKey == nil || r.Tokens == nil {
		return nil
	}
	s := routing.TrackingScope{Model: r.Model, BlockSize: sc.BlockSize(), CacheSalt: r.CacheSalt, LoRA: r.LoRA}
	var err error
	if sc.TrackHashes, err = d.cfg.TrackingKey.SeqHashes(sc.TrackHashes[:0], r.Tokens, s); err != nil {
		return fmt.Errorf("%w: tracking hashes: %w", ErrBadRequest, err)
	}
	sc.Keyed = true
	return nil
}
