package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// registerServing registers the client-facing API's options: where it
// listens, what it accepts and how it drains.
func (f *nodeFlags) registerServing(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "OpenAI-compatible HTTP listen address")
	fs.StringArrayVar(&c.Tokenizers, "tokenizer", nil, "MODEL=DIR: a model's Hugging Face tokenizer (repeatable)\n"+
		"DIR holds the model's tokenizer.json and tokenizer_config.json, so that text prompts are routed by the "+
		"engine's own token blocks; a model without one is routed by text blocks.")
	fs.Int64Var(&c.Frontend.MaxBodyBytes, "max-body-bytes", oaiedge.MaxBodyBytes, "largest request body accepted")
	registerBodyBudgetFlag(fs, &c.Frontend.Edge.MaxBufferedBodyBytes)
	fs.IntVar(&c.Dispatch.MaxPromptTokens, "max-prompt-tokens", c.Dispatch.MaxPromptTokens, "longest prompt accepted, in tokens")
	d := &c.Drain
	fs.DurationVar(&d.ReadyDelay, "drain-ready-delay", 0, "on SIGTERM, keep serving this long after /ready turns 503\n"+
		"So that load balancers stop sending first; 0 closes at once, for a preStop hook that already waits.")
	fs.DurationVar(&d.Timeout, "drain-timeout", frontend.ShutdownTimeout, "on SIGTERM, wait this long for in-flight requests\n"+
		"Streams still running then end with a shutting_down error event.")
}

// registerSessions registers session affinity: how long a session stays
// with its engine and how a request names its session.
func (f *nodeFlags) registerSessions(fs *pflag.FlagSet) {
	d := &f.cfg.Dispatch
	fs.DurationVar(&d.AffinityTTL, "session-affinity-ttl", 0, "keep a session on its engine for this idle time (0: no affinity)\n"+
		"Between 1s and 8760h.")
	fs.StringVar(&f.affinityMode, "session-affinity-mode", "hard", "hard: always its engine; soft: unless busy")
	fs.IntVar(&d.MaxSessions, "max-sessions", d.MaxSessions, "most live session bindings")
	registerSessionKeyFlags(fs, &f.cfg.Frontend.Edge.SessionKeys)
}
