package policy

import (
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// buildIndexes makes the approximate index of approximate mode with the
// configured policy, the index text prompts match against and, with
// PredictTTL, the side index. Under TTL the first two are one index, as
// they always were. Under LRU text prompts get a TTL index of their own:
// an LRU index counts blocks against a rank's capacity in blocks of its
// block size, and text chunks are not such blocks.
func (d *Decider) buildIndexes() error {
	var err error
	cfg := index.ApproxConfig{Policy: d.cfg.ApproxPolicy, TTL: d.cfg.ApproxTTL}
	if d.approx, err = index.NewApprox(cfg); err != nil {
		return configError("approx_ttl, approx_policy: %w", err)
	}
	d.text = d.approx
	if d.cfg.ApproxPolicy != index.PolicyTTL {
		if d.text, err = index.NewApprox(index.ApproxConfig{TTL: d.cfg.ApproxTTL}); err != nil {
			return configError("approx_ttl: %w", err)
		}
	}
	if d.cfg.PredictTTL > 0 {
		if d.side, err = index.NewSide(index.ApproxConfig{TTL: d.cfg.PredictTTL}); err != nil {
			return configError("predict_ttl: %w", err)
		}
	}
	return nil
}

// approxIndexes lists the Decider's own indexes, each once, for pruning
// and for forgetting a worker.
func (d *Decider) approxIndexes() []*index.Approx {
	out := []*index.Approx{d.approx}
	if d.text != d.approx {
		out = append(out, d.text)
	}
	if d.side != nil {
		out = append(out, d.side)
	}
	return out
}

// recordApprox records a decision of approximate mode: the prediction
// that the chosen rank now holds the prompt. Under LRU the rank is first
// declared with its advertised capacity (a change of capacity on a new
// card applies here), and the returned lease keeps the prompt's blocks
// from eviction until the request ends; a rank that advertises no
// capacity cannot be modelled and is not recorded.
func (d *Decider) recordApprox(info *routing.WorkerInfo, hashes []routing.SeqHash, now time.Time) (index.Lease, error) {
	if d.cfg.ApproxPolicy == index.PolicyLRU {
		if err := d.approx.SetWorker(*info); err != nil {
			return 0, err
		}
	}
	return d.approx.Record(info.Worker, hashes, now)
}

// releaseApprox ends a request's lease in the LRU approximate index: its
// blocks stay predicted as cached, now evictable, most recently released
// last. The zero lease (TTL, nothing recorded) does nothing.
func (d *Decider) releaseApprox(l index.Lease) {
	if l == 0 {
		return
	}
	if err := d.approx.Release(l); err != nil {
		d.cfg.Log.Warn("releasing an approximate-index lease", "err", err)
	}
}
