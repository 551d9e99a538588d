package policy

import (
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
)

// Match finds every candidate's cached prefix: token hashes in the exact
// index (merged with the side index when predicting), text hashes and
// everything in approximate mode in the approximate index. A text overlap
// of n chunks counts as n*64 tokens of cached prefix.
func (d *Decider) Match(sc *Scratch) {
	p := &sc.plan
	switch {
	case sc.Text:
		sc.matches = d.text.FindMatches(sc.Hashes, p.now, sc.matches[:0])
	case d.cfg.ApproximateMode:
		sc.matches = d.approx.FindMatches(sc.Hashes, p.now, sc.matches[:0])
	case d.side != nil:
		sc.exact = d.exact.FindMatches(sc.Hashes, sc.exact[:0])
		sc.side = d.side.FindMatches(sc.Hashes, p.now, sc.side[:0])
		sc.matches = index.MergeDevice(sc.matches[:0], sc.exact, sc.side)
	default:
		sc.matches = d.exact.FindMatches(sc.Hashes, sc.matches[:0])
	}
	if sc.Text {
		for i := range sc.matches {
			dev := int64(sc.matches[i].Device) * textTokensPerChunk / int64(p.blockSize)
			sc.matches[i].Overlap = routing.Overlap{Device: int32(min(dev, int64(p.blocks)))}
		}
	}
	assignOverlaps(sc.cands, sc.matches)
	if !sc.Text && !d.cfg.ApproximateMode {
		d.sharedHits(sc)
	}
}

// assignOverlaps copies each match's overlap to its candidate; both lists
// are sorted by worker.
func assignOverlaps(cands []Candidate, matches []routing.Match) {
	j := 0
	for i := range cands {
		w := cands[i].Info.Worker
		for j < len(matches) && matches[j].Worker.Compare(w) < 0 {
			j++
		}
		if j < len(matches) && matches[j].Worker == w {
			cands[i].Overlap = matches[j].Overlap
		}
	}
}

// trackerHashes are the hashes the load tracker books: token block hashes
// only, since text chunks are not blocks of the workers' size.
func (sc *Scratch) trackerHashes() []routing.SeqHash {
	if sc.Text {
		return nil
	}
	if sc.Keyed {
		return sc.TrackHashes
	}
	return sc.Hashes
}

// project fills every candidate's potential and current load, adding what
// the engine reports beyond the bookings.
func (d *Decider) project(sc *Scratch) error {
	p := &sc.plan
	sc.all = sc.all[:0]
	for i := range sc.cands {
		sc.all = append(sc.all, routing.Match{Worker: sc.cands[i].Info.Worker, Overlap: sc.cands[i].Overlap})
	}
	var err error
	q := load.Query{Hashes: sc.trackerHashes(), ISLTokens: p.isl, OutputTokens: p.osl}
	if sc.loads, err = p.tracker.Potential(sc.loads[:0], q, sc.all); err != nil {
		return err
	}
	for i := range sc.cands {
		c := &sc.cands[i]
		c.Active = p.tracker.Active(c.Info.Worker)
		c.Load = sc.loads[i]
		if d.cfg.Reports != nil {
			if rep, ok := d.cfg.Reports.Load(c.Info.Worker); ok {
				extra := excess(d.cfg.Tracking.mask(rep), c.Active)
				c.Active, c.Load = add(c.Active, extra), add(c.Load, extra)
			}
		}
	}
	return nil
}

// excess is, per field, how much a reported load exceeds the booked one.
func excess(rep, own routing.Load) routing.Load {
	return routing.Load{
		PrefillTokens:  max(0, rep.PrefillTokens-own.PrefillTokens),
		DecodeBlocks:   max(0, rep.DecodeBlocks-own.DecodeBlocks),
		ActiveRequests: max(0, rep.ActiveRequests-own.ActiveRequests),
	}
}

// add sums two loads field by field.
func add(a, b routing.Load) routing.Load {
	return routing.Load{
		PrefillTokens:  a.PrefillTokens + b.PrefillTokens,
		DecodeBlocks:   a.DecodeBlocks + b.DecodeBlocks,
		ActiveRequests: a.ActiveRequests + b.ActiveRequests,
	}
}

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
