package gateway

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/kvrouter/kvrouter/relay/consumer"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// Policy defaults. Each comment says why the value is what it is.
const (
	// DefaultPrefillCostPerTokenMs is 0.05 ms per prompt token, a prefill
	// rate of 20k tokens/s per engine (a mid-size model on one modern
	// GPU). With it a remote DC must hold about 3,000 more prompt tokens
	// than the local DC to pay for a 150 ms round trip.
	DefaultPrefillCostPerTokenMs = 0.05
	// DefaultUtilizationPenaltyMs charges 200 ms for a fully utilised DC,
	// about the queueing delay one extra batch step adds under load.
	DefaultUtilizationPenaltyMs = 200
	// DefaultMaxUtilization makes a remote DC at 95% utilisation or more
	// ineligible: it has no room for work sent from elsewhere.
	DefaultMaxUtilization = 0.95
	// DefaultMaxStaleness ignores lanes that have not heard from their
	// pool for 5 s, a few missed heartbeats: their depth and load may
	// describe a DC that has since changed or gone.
	DefaultMaxStaleness = 5 * time.Second
)

// Policy is the DC decision policy. For each candidate DC it computes
//
//	benefit(dc) = saved_prefill_tokens(dc) × PrefillCostPerTokenMs
//	            − wan_rtt_ms(dc) − load_penalty(dc)
//	saved_prefill_tokens(dc) = prefix_depth_blocks(dc) × block_size
//	load_penalty(dc) = PrefillTokens/Engines × PrefillCostPerTokenMs
//	                 + Utilization × UtilizationPenaltyMs
//
// where wan_rtt_ms(local) = 0, the local depth is exact and a remote one
// is its filter's estimate, and the load is the DC's last heartbeat (the
// local DC's from Config.LocalLoad, zero when unset). The first load term
// is the wait for the prefill already queued on an engine. The request
// goes to the DC with the largest benefit; a remote DC must beat the local
// one by more than MinAdvantageMs, so ties stay local. Without LocalLoad
// the local penalty is 0, and a remote DC then wins only with a deeper
// prefix; with it, a saturated local DC may also spill to an idle one.
type Policy struct {
	// LocalOnly never chooses a remote DC for prefix reuse. Sessions still
	// go to the DC that owns them (see doc.go).
	LocalOnly bool
	// PrefillCostPerTokenMs is the prefill time of one prompt token.
	PrefillCostPerTokenMs float64
	// UtilizationPenaltyMs is the penalty of a fully utilised DC.
	UtilizationPenaltyMs float64
	// MaxUtilization excludes remote DCs at or above it.
	MaxUtilization float64
	// MaxStaleness excludes lanes that have not heard from their pool for
	// longer; lanes without a snapshot yet are always excluded.
	MaxStaleness time.Duration
	// MinAdvantageMs is the margin a remote benefit must exceed the local
	// one by; 0 by default.
	MinAdvantageMs float64
}

// EnsureDefaults fills zero fields; set a negative MinAdvantageMs to
// prefer remote DCs on ties.
func (p *Policy) EnsureDefaults() {
	p.PrefillCostPerTokenMs = cmp.Or(p.PrefillCostPerTokenMs, DefaultPrefillCostPerTokenMs)
	p.UtilizationPenaltyMs = cmp.Or(p.UtilizationPenaltyMs, DefaultUtilizationPenaltyMs)
	p.MaxUtilization = cmp.Or(p.MaxUtilization, DefaultMaxUtilization)
	p.MaxStaleness = cmp.Or(p.MaxStaleness, DefaultMaxStaleness)
}

// Validate reports a knob outside its range, wrapped in ErrConfig.
func (p Policy) Validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !finite(p.PrefillCostPerTokenMs) || p.PrefillCostPerTokenMs < 0,
		!finite(p.UtilizationPenaltyMs) || p.UtilizationPenaltyMs < 0,
		!finite(p.MinAdvantageMs):
		return fmt.Errorf("%w: policy costs must be finite and non-negative", ErrConfig)
	case !(p.MaxUtilization > 0 && p.MaxUtilization <= 1):
		return fmt.Errorf("%w: max utilization %v outside (0, 1]", ErrConfig, p.MaxUtilization)
	case p.MaxStaleness < 0:
		return fmt.Errorf("%w: negative max staleness", ErrConfig)
	}
	return nil
}

// Candidate is one DC's terms in a decision.
type Candidate struct {
	DC string
	// Depth is the prefix depth in blocks; Saved the tokens it saves.
	Depth, Saved int
	RTT          time.Duration
	Load         producer.Load
	// Benefit is the formula's value in milliseconds.
	Benefit float64
}

// Choice is the policy's answer: the chosen DC (Remote false: the local
// one) and the candidate it won with.
type Choice struct {
	Remote bool
	Best   Candidate
	Local  Candidate
}

// Choose applies the formula to the local candidate and every remote
// lane result. rtt gives each remote DC's configured round trip; a lane
// whose DC has none configured is not a forwarding target and is skipped.
// The serving path asks the consumer for the winner directly (decide);
// Choose is the same decision over every lane's depth, for
// /v1/route/explain.
func (p Policy) Choose(local Candidate, remotes []consumer.Result, blockSize int, rtt func(dc string) (time.Duration, bool)) Choice {
	ch := p.local(local, blockSize)
	if p.LocalOnly {
		return ch
	}
	if r, _, ok := consumer.BestOf(remotes, p.objective(blockSize, rtt), p.minGain(ch.Local)); ok {
		ch.Best, ch.Remote = p.remote(r, blockSize, rtt), true
	}
	return ch
}

// local returns the choice of the local candidate alone, its terms
// filled in.
func (p Policy) local(local Candidate, blockSize int) Choice {
	local.Saved = local.Depth * blockSize
	local.Benefit = p.benefit(local, blockSize)
	return Choice{Best: local, Local: local}
}

// minGain is the benefit a remote DC must exceed to win over local.
func (p Policy) minGain(local Candidate) float64 { return local.Benefit + p.MinAdvantageMs }

// objective is the formula as a consumer.Objective: one block saves
// blockSize × PrefillCostPerTokenMs in every DC, and a remote DC's
// intercept is minus its round trip and load penalty. Lanes that are not
// eligible or whose DC has no configured round trip take no part.
func (p Policy) objective(blockSize int, rtt func(dc string) (time.Duration, bool)) consumer.Objective {
	return consumer.Objective{Slope: p.slope(blockSize), Intercept: p.intercepts(rtt)}
}

// intercepts returns the objective's Intercept. The gateway builds it once,
// so that a decision allocates nothing.
func (p Policy) intercepts(rtt func(dc string) (time.Duration, bool)) func(consumer.LaneView) (float64, bool) {
	return func(v consumer.LaneView) (float64, bool) {
		d, ok := rtt(v.Pool.DC)
		if !ok || !p.eligible(v) {
			return 0, false
		}
		return p.intercept(d, *v.Load), true
	}
}

// remote is the candidate of a chosen remote lane result.
func (p Policy) remote(r consumer.Result, blockSize int, rtt func(dc string) (time.Duration, bool)) Candidate {
	d, _ := rtt(r.Pool.DC)
	c := Candidate{DC: r.Pool.DC, Depth: r.Depth, Saved: r.Depth * blockSize, RTT: d, Load: r.Load}
	c.Benefit = p.benefit(c, blockSize)
	return c
}

// Eligible reports whether a remote lane may take part: it has a
// snapshot, is fresh enough, has engines and has room.
func (p Policy) Eligible(r consumer.Result) bool { return p.eligible(r.View()) }

// eligible is Eligible on a lane's view, the objective's argument.
func (p Policy) eligible(v consumer.LaneView) bool {
	return v.Ready && v.Staleness <= p.MaxStaleness && v.Load.Engines > 0 &&
		v.Load.Utilization < p.MaxUtilization
}

// benefit is the formula of the Policy comment, computed as the
// objective computes it so that both agree to the last bit.
func (p Policy) benefit(c Candidate, blockSize int) float64 {
	return float64(c.Depth)*p.slope(blockSize) + p.intercept(c.RTT, c.Load)
}

// slope is the benefit of one block.
func (p Policy) slope(blockSize int) float64 { return float64(blockSize) * p.PrefillCostPerTokenMs }

// intercept is the benefit of a DC with no prefix: minus its round trip
// and its load penalty.
func (p Policy) intercept(rtt time.Duration, l producer.Load) float64 {
	return -float64(rtt)/float64(time.Millisecond) - p.loadPenalty(l)
}

// loadPenalty is the expected queueing delay at a DC in milliseconds.
func (p Policy) loadPenalty(l producer.Load) float64 {
	queued := 0.0
	if l.Engines > 0 {
		queued = float64(l.PrefillTokens) / float64(l.Engines)
	}
	return queued*p.PrefillCostPerTokenMs + l.Utilization*p.UtilizationPenaltyMs
}
