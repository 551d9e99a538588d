package demo

import (
	"time"

	"github.com/kvrouter/kvrouter/sim"
)

// Summary is one policy's line of the live demo's report.
type Summary struct {
	Policy   string
	Requests int
	Errors   int
	// Cut counts streams broken mid-response by a node's death (not in
	// Errors): a client sees them fail and must retry itself.
	Cut int
	// FirstError is the first failure, for the report.
	FirstError error
	// HitRatio is the share of prompt tokens the engines served from their
	// prefix caches, as they reported in usage.prompt_tokens_details.
	HitRatio float64
	// PromptTokens and CachedTokens are the engines' usage totals over the
	// served requests; CachedTokens is the prefill the caches saved.
	PromptTokens int
	CachedTokens int
	TTFTP50      time.Duration
	TTFTP99      time.Duration
	ReqPerSec    float64
	TokPerSec    float64
	WallSeconds  float64
	// Sessions counts the conversations with at least two served
	// requests; Violations those served by more than one engine (hard
	// affinity promises 0).
	Sessions   int
	Violations int
	// Event describes the fault injected during the replay, if any.
	Event string
}

// Summarize folds the outcomes of one replay.
func Summarize(policy string, outs []Outcome, wall time.Duration) Summary {
	s := Summary{Policy: policy, Requests: len(outs), WallSeconds: wall.Seconds()}
	var ttft []time.Duration
	var prompt, cached, output int
	for _, o := range outs {
		if o.Cut {
			s.Cut++
			continue
		}
		if o.Err != nil {
			s.Errors++
			if s.FirstError == nil {
				s.FirstError = o.Err
			}
			continue
		}
		ttft = append(ttft, o.TTFT)
		prompt += o.PromptTokens
		cached += o.CachedTokens
		output += o.OutputTokens
	}
	s.Sessions, s.Violations = affinity(outs)
	s.PromptTokens, s.CachedTokens = prompt, cached
	if prompt > 0 {
		s.HitRatio = float64(cached) / float64(prompt)
	}
	s.TTFTP50, s.TTFTP99 = sim.Percentile(ttft, 0.5), sim.Percentile(ttft, 0.99)
	if wall > 0 {
		s.ReqPerSec = float64(len(outs)-s.Errors-s.Cut) / wall.Seconds()
		s.TokPerSec = float64(output) / wall.Seconds()
	}
	return s
}

// affinity counts the sessions served at least twice and those served by
// more than one engine.
func affinity(outs []Outcome) (sessions, violations int) {
	served := map[string]map[string]int{}
	for _, o := range outs {
		if o.Err != nil || o.Session == "" || o.Worker == "" {
			continue
		}
		if served[o.Session] == nil {
			served[o.Session] = map[string]int{}
		}
		served[o.Session][o.Worker]++
	}
	for _, ws := range served {
		n := 0
		for _, c := range ws {
			n += c
		}
		if n >= 2 {
			sessions++
		}
		if len(ws) > 1 {
			violations++
		}
	}
	return sessions, violations
}
