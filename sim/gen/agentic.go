package gen

import (
	"math/rand/v2"
	"time"

	"github.com/kvrouter/kvrouter/traces"
)

// Agentic is tool-calling agents: each session runs one agent type, whose
// long context (instructions and tool definitions) every session of that
// type shares, then its task, then many short turns in a loop: the model
// answers with a tool call, the tool's result is appended, and the whole
// context is sent again after the tool runs.
type Agentic struct {
	// Duration is the span over which sessions start. Default 10 minutes.
	Duration time.Duration
	// SessionsPerSecond is the rate of new sessions. Default 0.15, about
	// 80k prompt tokens/s offered, most of it a prefix sent before.
	SessionsPerSecond float64
	// Agents is the number of agent types, each with its own shared
	// context of AgentTokens. Defaults 4 and a median of 12,000 tokens.
	Agents      int
	AgentTokens LogNormal
	// TaskTokens is the session's own task description and files.
	// Default median 2,000 tokens.
	TaskTokens LogNormal
	// MeanTurns is the mean number of model calls of a session
	// (geometric). Default 25.
	MeanTurns float64
	// ToolTokens is a tool result appended after each call and
	// OutputTokens the call itself. Defaults: medians 400 and 120 tokens.
	ToolTokens   LogNormal
	OutputTokens LogNormal
	// ToolTime is the mean time a tool runs between two calls
	// (exponential). Default 2 s.
	ToolTime time.Duration
}

// DefaultAgentic returns the published parameters of the agentic workload.
func DefaultAgentic() Agentic {
	return Agentic{
		Duration: 10 * time.Minute, SessionsPerSecond: 0.15, Agents: 4,
		AgentTokens:  LogNormal{Median: 12000, Sigma: 0.4, Min: 2048, Max: 40000},
		TaskTokens:   LogNormal{Median: 2000, Sigma: 0.8, Min: 64, Max: 20000},
		MeanTurns:    20,
		ToolTokens:   LogNormal{Median: 400, Sigma: 0.8, Min: 8, Max: 12000},
		OutputTokens: LogNormal{Median: 120, Sigma: 0.7, Min: 1, Max: 2000},
		ToolTime:     2 * time.Second,
	}
}

func (a Agentic) validate() error {
	if err := positive(map[string]float64{"duration": float64(a.Duration), "sessions_per_second": a.SessionsPerSecond,
		"agents": float64(a.Agents), "mean_turns": a.MeanTurns, "tool_time": float64(a.ToolTime)}); err != nil {
		return err
	}
	if a.MeanTurns < 1 {
		return errorf("mean_turns must be >= 1")
	}
	for name, d := range map[string]LogNormal{"agent_tokens": a.AgentTokens, "task_tokens": a.TaskTokens,
		"tool_tokens": a.ToolTokens, "output_tokens": a.OutputTokens} {
		if err := d.validate(name); err != nil {
			return err
		}
	}
	return nil
}

// Generate returns the trace of the given seed.
func (a Agentic) Generate(seed uint64) ([]traces.Request, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	r := rng(seed, NameAgentic)
	g := &ids{}
	agents := make([]segment, a.Agents)
	for i := range agents {
		agents[i] = g.segment(a.AgentTokens.draw(r))
	}
	var out []traces.Request
	for _, start := range poisson(r, a.SessionsPerSecond, a.Duration) {
		out = a.session(r, g, agents[r.IntN(len(agents))], start, out)
	}
	return sorted(out), nil
}

// session appends one agent session's calls to out.
func (a Agentic) session(r *rand.Rand, g *ids, agent segment, at time.Duration, out []traces.Request) []traces.Request {
	var p prompt
	p.share(g, agent)
	p.add(g, a.TaskTokens.draw(r))
	for turn := 0; turn == 0 || r.Float64() >= 1/a.MeanTurns; turn++ {
		call := a.OutputTokens.draw(r)
		out = append(out, p.request(g, at, call))
		p.add(g, call+a.ToolTokens.draw(r))
		at += exp(r, a.ToolTime)
	}
	return out
}
