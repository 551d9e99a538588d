// Package gen generates request traces of the workload shapes users
// recognise — multi-turn chat, tenants sharing system prompts, agentic tool
// loops and retrieval-augmented generation — in Mooncake form (timestamp
// in milliseconds, input and output lengths, and the ids of the prompt's
// 512-token blocks), so that `kvrouter sim` and every other tool that reads
// Mooncake traces can replay them.
//
// Model. A prompt is a sequence of segments (a system prompt, a document, a
// turn of a conversation), each a number of tokens with a stable identity.
// Block ids follow content: a complete 512-token block gets one id for its
// content at its position in the prompt, so two prompts share exactly the
// blocks of their common prefix; a prompt's partial last block gets a
// fresh id, since the next prompt that extends it changes its content.
// The generators that reuse a segment at different offsets (RAG's
// documents) keep segments a whole number of blocks long so that a
// document is the same blocks wherever it appears; the simulator's
// sequence hashes still tell apart the same document after different
// prefixes, as an engine's prefix cache does.
//
// Every parameter of every workload is a field of its Params with its
// default and the reason for it; Default returns them, and a seed fixes
// the whole trace. Arrivals are Poisson (sessions or requests), think times
// exponential and lengths log-normal, the usual shapes of published
// serving traces. The generators do not model cancellations, time of day,
// or output lengths that depend on the prompt.
//
// Concurrency. Generation is a pure function of its parameters and seed;
// the package has no state.
package gen
