package dispatch

import (
	"slices"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// textTokensPerChunk is the token length a text chunk stands for, used to
// convert a text overlap in chunks to blocks of the workers' block size.
const textTokensPerChunk = routing.DefaultTextBlockBytes / TextBytesPerToken

// sortCandidates orders candidates by worker, as the indexes order their
// matches, so the two merge in one pass and the order does not depend on
// the registry's.
func sortCandidates(cs []policy.Candidate) {
	slices.SortFunc(cs, func(a, b policy.Candidate) int { return a.Info.Worker.Compare(b.Info.Worker) })
}

// match finds every worker's cached prefix into sc.matches: token hashes
// in the exact index (merged with the side index when predicting), text
// hashes and everything in approximate mode in the approximate index.
func (d *Dispatcher) match(sc *scratch, r *Request) {
	p := &sc.plan
	switch {
	case p.text || d.cfg.ApproximateMode:
		sc.matches = d.approx.FindMatches(sc.hashes, p.now, sc.matches[:0])
	case d.side != nil:
		sc.exact = d.idx.FindMatches(sc.hashes, sc.exact[:0])
		sc.side = d.side.FindMatches(sc.hashes, p.now, sc.side[:0])
		sc.matches = index.MergeDevice(sc.matches[:0], sc.exact, sc.side)
	default:
		sc.matches = d.idx.FindMatches(sc.hashes, sc.matches[:0])
	}
	if p.text {
		for i := range sc.matches {
			dev := int64(sc.matches[i].Device) * textTokensPerChunk / int64(p.blockSize)
			sc.matches[i].Overlap = routing.Overlap{Device: int32(min(dev, int64(p.blocks)))}
		}
	}
	assignOverlaps(sc.cands, sc.matches)
}

// assignOverlaps copies each match's overlap to its candidate; both lists
// are sorted by worker.
func assignOverlaps(cands []policy.Candidate, matches []routing.Match) {
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
func (sc *scratch) trackerHashes() []routing.SeqHash {
	if sc.plan.text {
		return nil
	}
	return sc.hashes
}

// project fills every candidate's potential and current load, adding what
// the engine reports beyond the dispatcher's own accounting.
func (d *Dispatcher) project(sc *scratch) error {
	p := &sc.plan
	sc.all = sc.all[:0]
	for i := range sc.cands {
		sc.all = append(sc.all, routing.Match{Worker: sc.cands[i].Info.Worker, Overlap: sc.cands[i].Overlap})
	}
	var err error
	q := load.Query{Hashes: sc.trackerHashes(), ISLTokens: p.isl}
	if sc.loads, err = p.tracker.Potential(sc.loads[:0], q, sc.all); err != nil {
		return err
	}
	for i := range sc.cands {
		c := &sc.cands[i]
		c.Active = p.tracker.Active(c.Info.Worker)
		c.Load = sc.loads[i]
		if d.reports != nil {
			if rep, ok := d.reports.Load(c.Info.Worker); ok {
				extra := excess(rep, c.Active)
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
