package gen

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/traces"
)

// ErrParams is returned for invalid generator parameters; the message
// names the field.
var ErrParams = errors.New("gen: invalid parameters")

// The workload names, as `kvrouter sim gen --workload` takes them.
const (
	NameChat    = "chat"
	NameTenants = "tenants"
	NameAgentic = "agentic"
	NameRAG     = "rag"
)

// Names lists the workloads.
func Names() []string { return []string{NameChat, NameTenants, NameAgentic, NameRAG} }

// Generate returns the named workload with its default parameters and the
// given seed.
func Generate(name string, seed uint64) ([]traces.Request, error) {
	switch name {
	case NameChat:
		return DefaultChat().Generate(seed)
	case NameTenants:
		return DefaultTenants().Generate(seed)
	case NameAgentic:
		return DefaultAgentic().Generate(seed)
	case NameRAG:
		return DefaultRAG().Generate(seed)
	}
	return nil, fmt.Errorf("%w: unknown workload %q (one of %v)", ErrParams, name, Names())
}

// LogNormal is a log-normal length distribution by its median and the
// standard deviation of its logarithm, clamped to [Min, Max] tokens.
type LogNormal struct {
	Median   float64
	Sigma    float64
	Min, Max int
}

func (d LogNormal) validate(field string) error {
	if !(d.Median > 0) || !(d.Sigma >= 0) || d.Min < 0 || d.Max < d.Min || math.IsInf(d.Median, 0) || math.IsInf(d.Sigma, 0) {
		return fmt.Errorf("%w: %s: median > 0, sigma >= 0 and 0 <= min <= max required, got %+v", ErrParams, field, d)
	}
	return nil
}

func (d LogNormal) draw(r *rand.Rand) int {
	v := d.Median * math.Exp(d.Sigma*r.NormFloat64())
	return min(max(int(math.Round(v)), d.Min), d.Max)
}

// exp draws an exponential duration of the given mean.
func exp(r *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(mean))
}

// positive checks fields that must be positive.
func positive(fields map[string]float64) error {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if v := fields[k]; !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: %s must be positive and finite, got %v", ErrParams, k, v)
		}
	}
	return nil
}

// ids hands out block ids, each used for one block content.
type ids struct{ next uint64 }

func (g *ids) take(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = g.next
		g.next++
	}
	return out
}

// segment is shared content: its complete blocks' ids and its length.
type segment struct {
	blocks []uint64
	tokens int
}

func (g *ids) segment(tokens int) segment {
	return segment{blocks: g.take(tokens / traces.MooncakeBlockTokens), tokens: tokens}
}

// prompt is a growing token sequence: the ids of its complete blocks and
// the tokens of its partial last block.
type prompt struct {
	full    []uint64
	partial int
}

// add appends n new tokens: the partial block and the blocks they complete
// are new content.
func (p *prompt) add(g *ids, n int) {
	total := p.partial + n
	p.full = append(p.full, g.take(total/traces.MooncakeBlockTokens)...)
	p.partial = total % traces.MooncakeBlockTokens
}

// share appends a shared segment: at a block boundary its blocks keep
// their ids, elsewhere it is new content as far as blocks go.
func (p *prompt) share(g *ids, s segment) {
	if p.partial != 0 {
		p.add(g, s.tokens)
		return
	}
	p.full = append(p.full, s.blocks...)
	p.partial = s.tokens % traces.MooncakeBlockTokens
}

func (p *prompt) tokens() int { return len(p.full)*traces.MooncakeBlockTokens + p.partial }

// request is the trace record of the prompt as it stands; the partial
// block gets a fresh id.
func (p *prompt) request(g *ids, at time.Duration, output int) traces.Request {
	hs := slices.Clone(p.full)
	if p.partial > 0 {
		hs = append(hs, g.take(1)...)
	}
	return traces.Request{Arrival: at, InputTokens: p.tokens(), OutputTokens: output, HashIDs: hs}
}

// sorted orders requests by arrival, keeping generation order on ties, and
// rounds arrivals to the millisecond the format carries.
func sorted(reqs []traces.Request) []traces.Request {
	for i := range reqs {
		reqs[i].Arrival = reqs[i].Arrival.Round(time.Millisecond)
	}
	slices.SortStableFunc(reqs, func(a, b traces.Request) int {
		switch {
		case a.Arrival < b.Arrival:
			return -1
		case a.Arrival > b.Arrival:
			return 1
		}
		return 0
	})
	return reqs
}

// rng returns the generator of a workload's seed; the stream names the
// workload so that two workloads with one seed differ.
func rng(seed uint64, stream string) *rand.Rand {
	var s uint64
	for _, c := range stream {
		s = s*131 + uint64(c)
	}
	return rand.New(rand.NewPCG(seed, s))
}

// poisson returns the arrival times of a Poisson process of the given
// rate per second over d.
func poisson(r *rand.Rand, perSecond float64, d time.Duration) []time.Duration {
	var out []time.Duration
	for t := exp(r, time.Duration(float64(time.Second)/perSecond)); t < d; t += exp(r, time.Duration(float64(time.Second)/perSecond)) {
		out = append(out, t)
	}
	return out
}

// zipf draws item indexes in [0, n) with popularity falling as a power
// law of exponent s > 1.
func zipf(r *rand.Rand, s float64, n int) func() int {
	z := rand.NewZipf(r, s, 1, uint64(n-1))
	return func() int { return int(z.Uint64()) }
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrParams}, args...)...)
}
