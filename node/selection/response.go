package selection

import (
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// selectionResponse is the answer of a Select.
func selectionResponse(id string, s *dispatch.Selection) *kvrpb.SelectResponse {
	out := &kvrpb.SelectResponse{RequestId: id, Worker: worker(s.Worker, s.EndpointURL),
		BlockSize: uint32(s.BlockSize), Blocks: uint32(s.Blocks), CachedBlocks: uint32(s.CachedBlocks),
		SessionBound: s.SessionBound, Reason: s.Reason}
	out.Candidates = make([]*kvrpb.SelectCandidate, len(s.Candidates))
	for i, c := range s.Candidates {
		sc := &kvrpb.SelectCandidate{EngineId: uint64(c.Worker.ID), DpRank: c.Worker.Rank,
			DeviceBlocks: c.Overlap.Device, HostBlocks: c.Overlap.Host, DiskBlocks: c.Overlap.Disk,
			Potential: load(c.Load), Active: load(c.Active), Eligible: c.Eligible, Chosen: c.Worker == s.Worker}
		if c.Costed {
			sc.Cost = &c.Cost
		}
		out.Candidates[i] = sc
	}
	if p := s.Prefill; p != nil {
		out.PrefillWorker = prefillWorker(p.Worker, p.EndpointURL, p.BootstrapPort, p.DPSize)
	}
	return out
}

// decisionResponse is the answer of a reservation.
func decisionResponse(id string, d *dispatch.Decision) *kvrpb.SelectResponse {
	out := &kvrpb.SelectResponse{RequestId: id, Worker: worker(d.Worker, d.EndpointURL),
		Blocks: uint32(d.Blocks), CachedBlocks: uint32(d.CachedBlocks), SessionBound: d.SessionBound}
	if p := d.Prefill; p != nil {
		out.PrefillWorker = prefillWorker(p.Worker, p.EndpointURL, p.BootstrapPort, p.DPSize)
	}
	return out
}

// prefillWorker is a pair's prefill engine, with what its hand-off needs.
func prefillWorker(w routing.Worker, baseURL string, bootstrapPort, dpSize uint32) *kvrpb.SelectWorker {
	out := worker(w, baseURL)
	out.BootstrapPort, out.DpSize = bootstrapPort, dpSize
	return out
}

func worker(w routing.Worker, baseURL string) *kvrpb.SelectWorker {
	hp, _ := dispatch.HostPort(baseURL)
	return &kvrpb.SelectWorker{EngineId: uint64(w.ID), DpRank: w.Rank, Endpoint: hp, Url: baseURL}
}

func load(l routing.Load) *kvrpb.SelectLoad {
	return &kvrpb.SelectLoad{PrefillTokens: l.PrefillTokens, DecodeBlocks: l.DecodeBlocks, ActiveRequests: l.ActiveRequests}
}
