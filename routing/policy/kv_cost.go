package policy

import "math"

// Costs appends to dst the cost of each candidate under the KV cost model
// and returns the extended slice:
//
//	active(w)   = Load.PrefillTokens - max(0, ISL - Overlap.Device*BlockSize), or 0 untracked
//	excess(w)   = ((active(w) - min over candidates of active) / BlockSize) / Blocks()
//	decay(w)    = 1 / (1 + OverlapScoreCreditDecay*excess(w)), or 1 untracked
//	credit(w)   = OverlapScoreCredit*decay(w)*Device + HostCacheHitWeight*Host
//	            + DiskCacheHitWeight*Disk + SharedCacheMultiplier*SharedHits
//	prefill(w)  = max(0, (active(w) + ISL)/BlockSize - credit(w))
//	cost(w)     = PrefillLoadScale*prefill(w) + Load.DecodeBlocks
//	            + DecodeActiveRequestWeight*Load.ActiveRequests
//
// Load.DecodeBlocks already includes the request's new blocks. The
// candidates are the eligible ones: the decay compares each worker with the
// least loaded of them. Costs does not validate req; Pipeline.Route does.
func (c KVConfig) Costs(dst []float64, req *Request, cands []Candidate) []float64 {
	n, minActive := len(dst), math.Inf(1)
	for i := range cands {
		a := float64(c.activePrefill(req, &cands[i]))
		dst = append(dst, a)
		minActive = min(minActive, a)
	}
	k := c.kernel(req, minActive)
	for i := range cands {
		dst[n+i] = k.cost(&cands[i], dst[n+i])
	}
	return dst
}

// activePrefill is the candidate's active prefill tokens without the
// request, recovered from the potential load.
func (c KVConfig) activePrefill(req *Request, cand *Candidate) int64 {
	if !c.TrackPrefillTokens {
		return 0
	}
	return max(0, cand.Load.PrefillTokens-req.uncached(cand.Overlap))
}

// costKernel holds what the cost of every candidate of one request shares,
// computed once per selection.
type costKernel struct {
	cfg       *KVConfig
	blockSize float64
	isl       float64
	// decayPerToken turns excess active prefill tokens into the decay
	// denominator's term: decay / (BlockSize * Blocks()); 0 disables decay.
	decayPerToken float64
	minActive     float64
}

// kernel prepares the per-request constants of the cost model.
func (c *KVConfig) kernel(req *Request, minActive float64) costKernel {
	k := costKernel{
		cfg:       c,
		blockSize: float64(max(req.BlockSize, 1)),
		isl:       float64(req.ISLTokens),
		minActive: minActive,
	}
	if c.TrackPrefillTokens && c.OverlapScoreCreditDecay > 0 {
		// Excess is measured in blocks and normalised by the request's
		// size, so "one request's worth" of extra backlog means the same
		// for short and long prompts.
		k.decayPerToken = c.OverlapScoreCreditDecay / k.blockSize / float64(max(req.Blocks(), 1))
	}
	return k
}

// cost is one candidate's cost given its active prefill tokens.
func (k *costKernel) cost(cand *Candidate, active float64) float64 {
	c, o := k.cfg, cand.Overlap
	decay := 1 / (1 + k.decayPerToken*(active-k.minActive))
	credit := c.OverlapScoreCredit*decay*float64(o.Device) +
		c.HostCacheHitWeight*float64(o.Host) +
		c.DiskCacheHitWeight*float64(o.Disk) +
		c.SharedCacheMultiplier*float64(cand.SharedHits)
	prefill := max(0, (active+k.isl)/k.blockSize-credit)
	return c.PrefillLoadScale*prefill + float64(cand.Load.DecodeBlocks) +
		c.DecodeActiveRequestWeight*float64(cand.Load.ActiveRequests)
}
