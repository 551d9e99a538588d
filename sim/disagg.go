package sim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// A disaggregated replay (Config.PrefillEngines) runs the first engines as
// prefill engines and the others as decode engines, and routes each
// request with the node's two-hop decision (policy.Disagg): the request
// goes to its prefill engine as a one-token request (the prefill hop);
// when that finishes, its cache moves to the decode engine the decision
// chose (mocker.Request.RemotePrefill: the transfer time of the engines'
// timing model, then the prompt's tail), which generates the answer. The
// client's first token is the decode engine's, so TTFT runs from the
// arrival to it and includes the prefill, the transfer and one decode
// step; ITL is the decode engine's. The hit ratio and the load balance
// are the prefill engines'. The two hand-offs (vLLM's, one hop after the
// other, and SGLang's, both at once with the decode engine waiting for
// the cache) have the same timing here: the decode engine can start only
// once the prefill engine is done either way.

// disaggState is a disaggregated replay's own state: each request's decode
// slot, from its decision to its decode hop.
type disaggState struct {
	decode map[string]int
}

// disaggInfos sets the engines' roles: prefill for the first n, decode
// for the others.
func disaggInfos(infos []routing.WorkerInfo, n int) {
	for i := range infos {
		infos[i].Role = routing.RoleDecode
		if i < n {
			infos[i].Role = routing.RolePrefill
		}
	}
}

// admitPair routes arrival i to a pair and submits its prefill hop.
func (rp *replay) admitPair(i int) error {
	p := &rp.prompts[i]
	now := rp.arrival(i)
	id := strconv.Itoa(i)
	rp.report(now)
	rp.trace.sample(now, rp.engines)
	rt, decode, err := rp.router.routePair(id, p, now)
	if err != nil {
		return fmt.Errorf("routing request %d: %w", i, err)
	}
	rp.decisions = append(rp.decisions, rt.took)
	rp.trace.decided(i, p, now, rt, hitLimit(p, rp.cfg.BlockSize))
	rp.dis.decode[id] = decode
	req := mocker.Request{ID: id, Locals: p.Locals, Seqs: p.Hashes, PromptTokens: p.InputTokens, MaxTokens: 1}
	if err := rp.engines[rt.slot].Submit(req, now); err != nil {
		return fmt.Errorf("submitting request %d's prefill: %w", i, err)
	}
	return nil
}

// stepPair feeds one engine step of a disaggregated replay back: a
// prefill engine's admissions (the hits) and completions (which start the
// decode hops), a decode engine's first tokens and completions.
func (rp *replay) stepPair(i int, t time.Time, res *mocker.StepResult) error {
	if i >= rp.cfg.PrefillEngines {
		for _, ft := range res.FirstTokens {
			rp.router.decodeFirstToken(ft.ID, t)
			rp.trace.firstToken(ft.ID, rp.prompts)
		}
		rp.reportOutput(i, t)
		for _, c := range res.Finished {
			rp.router.decodeDone(c.ID, t)
			rp.finishPair(c)
		}
		return nil
	}
	for _, a := range res.Admitted {
		if !a.Readmission {
			rp.trace.admitted(a.ID, a.HitBlocks)
		}
	}
	for _, c := range res.Finished {
		rp.router.prefillDone(c.ID, t)
		if err := rp.startDecode(i, c, t); err != nil {
			return err
		}
	}
	return nil
}

// startDecode accounts a finished prefill hop and submits the request's
// decode hop at t, when its cache starts moving.
func (rp *replay) startDecode(slot int, c mocker.Completion, t time.Time) error {
	n, err := strconv.Atoi(c.ID)
	if err != nil {
		return fmt.Errorf("request id %q: %w", c.ID, err)
	}
	p := &rp.prompts[n]
	rp.hits += int64(c.HitBlocks)
	rp.blocks += int64(c.PromptBlocks)
	rp.prefill[slot] += float64(c.PromptTokens - c.HitBlocks*rp.cfg.BlockSize)
	d := rp.dis.decode[c.ID]
	delete(rp.dis.decode, c.ID)
	req := mocker.Request{ID: c.ID, Locals: p.Locals, Seqs: p.Hashes, PromptTokens: p.InputTokens,
		MaxTokens: max(1, p.OutputTokens), RemotePrefill: true}
	if err := rp.engines[d].Submit(req, t); err != nil {
		return fmt.Errorf("submitting request %s's decode: %w", c.ID, err)
	}
	return nil
}

// finishPair records a request whose decode hop finished: TTFT from the
// client's arrival, the decode engine's inter-token latency.
func (rp *replay) finishPair(c mocker.Completion) {
	n, _ := strconv.Atoi(c.ID)
	ttft := c.FirstToken.Sub(rp.arrival(n))
	rp.done++
	rp.ttft = append(rp.ttft, ttft)
	rp.trace.finished(c.ID, ttft, c.Done)
	if c.OutputTokens > 1 {
		rp.itl = append(rp.itl, c.MeanITL())
	}
	rp.outTokens += int64(c.OutputTokens)
	if c.Done.After(rp.last) {
		rp.last = c.Done
	}
}

// routePair picks a pair for p and books both hops.
func (r *router) routePair(id string, p *Prompt, now time.Time) (routed, int, error) {
	start := time.Now()
	r.now = now
	ctx := context.Background()
	q := policy.Query{ID: id, Ranks: r.infos, ISLTokens: p.InputTokens, SessionKey: p.Session}
	if r.hints {
		q.OutputTokens = p.OutputTokens
	}
	if err := r.pair.Candidates(ctx, &r.ds, &q, now); err != nil {
		return routed{}, 0, err
	}
	r.ds.Prefill.Hashes = p.Hashes
	r.pair.Match(&r.ds)
	pc, err := r.pair.Choose(ctx, &r.ds, &q)
	if err != nil {
		return routed{}, 0, err
	}
	out := routed{took: time.Since(start), slot: r.slot[pc.Prefill.Worker], chosen: pc.Prefill.CachedBlocks}
	for _, c := range r.ds.Prefill.Candidates() {
		out.best = max(out.best, int(c.Overlap.Device))
	}
	b, err := r.pair.Book(ctx, &r.ds, &pc)
	if err != nil {
		return routed{}, 0, fmt.Errorf("booking %s: %w", id, err)
	}
	r.ds.Prefill.Hashes = nil // the prompt's, not the scratch's to reuse
	r.pairs[id] = &b
	return out, r.slot[pc.Decode.Worker], nil
}

// prefillDone ends a request's prefill hop at now.
func (r *router) prefillDone(id string, now time.Time) {
	if b := r.pairs[id]; b != nil {
		r.now = now
		b.Prefill.Done(context.Background(), policy.Succeeded)
	}
}

// decodeFirstToken reports the decode hop's first token at now.
func (r *router) decodeFirstToken(id string, now time.Time) {
	if b := r.pairs[id]; b != nil {
		r.now = now
		b.Decode.FirstToken(context.Background())
	}
}

// decodeDone ends a request's decode hop at now.
func (r *router) decodeDone(id string, now time.Time) {
	if b := r.pairs[id]; b != nil {
		r.now = now
		b.Decode.Done(context.Background(), policy.Succeeded)
		delete(r.pairs, id)
		delete(r.generated, id)
	}
}
