package gen

import (
	"time"

	"github.com/kvrouter/kvrouter/traces"
)

// Tenants is many applications on one fleet, each with its own system
// prompt (instructions, few-shot examples, tool schemas) in front of
// single-turn requests. Requests arrive as one Poisson process and pick
// their tenant by a power law: a few tenants carry most of the traffic.
type Tenants struct {
	// Duration is the span of the trace. Default 10 minutes.
	Duration time.Duration
	// RequestsPerSecond is the arrival rate. Default 12, about 55k prompt
	// tokens/s with the lengths below.
	RequestsPerSecond float64
	// Tenants is the number of applications. Default 32.
	Tenants int
	// Popularity is the power law exponent (> 1) of the tenants' shares.
	// Default 1.2: the busiest tenant takes about a third of the requests.
	Popularity float64
	// SystemTokens is each tenant's system prompt. Default median 3,000
	// tokens, from 512 to 16k.
	SystemTokens LogNormal
	// UserTokens and OutputTokens are each request's own input and reply.
	// Defaults: medians 600 and 200 tokens.
	UserTokens   LogNormal
	OutputTokens LogNormal
}

// DefaultTenants returns the published parameters of the tenants workload.
func DefaultTenants() Tenants {
	return Tenants{
		Duration: 10 * time.Minute, RequestsPerSecond: 12, Tenants: 32, Popularity: 1.2,
		SystemTokens: LogNormal{Median: 3000, Sigma: 0.8, Min: 512, Max: 16000},
		UserTokens:   LogNormal{Median: 600, Sigma: 1, Min: 8, Max: 8000},
		OutputTokens: LogNormal{Median: 200, Sigma: 0.8, Min: 1, Max: 4000},
	}
}

func (t Tenants) validate() error {
	if err := positive(map[string]float64{"duration": float64(t.Duration), "requests_per_second": t.RequestsPerSecond,
		"tenants": float64(t.Tenants)}); err != nil {
		return err
	}
	if !(t.Popularity > 1) || t.Tenants < 2 {
		return errorf("popularity must be > 1 and tenants >= 2")
	}
	for name, d := range map[string]LogNormal{"system_tokens": t.SystemTokens, "user_tokens": t.UserTokens, "output_tokens": t.OutputTokens} {
		if err := d.validate(name); err != nil {
			return err
		}
	}
	return nil
}

// Generate returns the trace of the given seed.
func (t Tenants) Generate(seed uint64) ([]traces.Request, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	r := rng(seed, NameTenants)
	g := &ids{}
	systems := make([]segment, t.Tenants)
	for i := range systems {
		systems[i] = g.segment(t.SystemTokens.draw(r))
	}
	pick := zipf(r, t.Popularity, t.Tenants)
	var out []traces.Request
	for _, at := range poisson(r, t.RequestsPerSecond, t.Duration) {
		var p prompt
		p.share(g, systems[pick()])
		p.add(g, t.UserTokens.draw(r))
		out = append(out, p.request(g, at, t.OutputTokens.draw(r)))
	}
	return sorted(out), nil
}
