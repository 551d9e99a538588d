package gen

import (
	"math/rand/v2"
	"time"

	"github.com/kvrouter/kvrouter/traces"
)

// Chat is multi-turn chat: conversations start as a Poisson process, every
// conversation opens with the product's system prompt (shared by all), and
// each turn resends the whole conversation so far plus the user's new
// message; the reply joins the conversation for the next turn.
type Chat struct {
	// Duration is the span over which conversations start. Default 10
	// minutes, long enough for caches to fill and turn over.
	Duration time.Duration
	// SessionsPerSecond is the rate of new conversations. Default 2,
	// which with the lengths below offers about 60k prompt tokens/s, the
	// bundled trace's rate: eight default engines are busy, not
	// saturated.
	SessionsPerSecond float64
	// SystemTokens is the shared system prompt. Default 1,024 tokens, a
	// typical assistant preamble.
	SystemTokens int
	// MeanTurns is the mean number of turns of a conversation
	// (geometric). Default 6.
	MeanTurns float64
	// PasteProbability is the share of conversations whose first message
	// pastes a document of PasteTokens. Defaults 0.2 and a median of
	// 6,000 tokens: the long conversations that make caches overflow.
	PasteProbability float64
	PasteTokens      LogNormal
	// UserTokens and OutputTokens are each turn's new message and reply.
	// Defaults: medians 400 and 300 tokens.
	UserTokens   LogNormal
	OutputTokens LogNormal
	// ThinkTime is the mean time between a turn and the next (exponential).
	// Default 30 s: the user reads the reply and types.
	ThinkTime time.Duration
}

// DefaultChat returns the published parameters of the chat workload.
func DefaultChat() Chat {
	return Chat{
		Duration: 10 * time.Minute, SessionsPerSecond: 2, SystemTokens: 1024, MeanTurns: 6,
		PasteProbability: 0.2, PasteTokens: LogNormal{Median: 6000, Sigma: 0.6, Min: 512, Max: 32000},
		UserTokens:   LogNormal{Median: 400, Sigma: 1, Min: 8, Max: 8000},
		OutputTokens: LogNormal{Median: 300, Sigma: 0.7, Min: 1, Max: 4000},
		ThinkTime:    30 * time.Second,
	}
}

func (c Chat) validate() error {
	if err := positive(map[string]float64{"duration": float64(c.Duration), "sessions_per_second": c.SessionsPerSecond,
		"system_tokens": float64(c.SystemTokens), "mean_turns": c.MeanTurns, "think_time": float64(c.ThinkTime)}); err != nil {
		return err
	}
	if !(c.PasteProbability >= 0 && c.PasteProbability <= 1) || c.MeanTurns < 1 {
		return errorf("paste_probability must be in [0, 1] and mean_turns >= 1")
	}
	for name, d := range map[string]LogNormal{"paste_tokens": c.PasteTokens, "user_tokens": c.UserTokens, "output_tokens": c.OutputTokens} {
		if err := d.validate(name); err != nil {
			return err
		}
	}
	return nil
}

// Generate returns the trace of the given seed.
func (c Chat) Generate(seed uint64) ([]traces.Request, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	r := rng(seed, NameChat)
	g := &ids{}
	system := g.segment(c.SystemTokens)
	var out []traces.Request
	for _, start := range poisson(r, c.SessionsPerSecond, c.Duration) {
		out = c.conversation(r, g, system, start, out)
	}
	return sorted(out), nil
}

// conversation appends one conversation's turns to out.
func (c Chat) conversation(r *rand.Rand, g *ids, system segment, at time.Duration, out []traces.Request) []traces.Request {
	var p prompt
	p.share(g, system)
	if r.Float64() < c.PasteProbability {
		p.add(g, c.PasteTokens.draw(r))
	}
	for turn := 0; turn == 0 || r.Float64() >= 1/c.MeanTurns; turn++ {
		p.add(g, c.UserTokens.draw(r))
		reply := c.OutputTokens.draw(r)
		out = append(out, p.request(g, at, reply))
		p.add(g, reply)
		at += exp(r, c.ThinkTime)
	}
	return out
}
