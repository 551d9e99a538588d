// Package oaiedge is the OpenAI-compatible request edge shared by the
// router node (node/frontend) and the DC gateway (relay/gateway): a
// validating JSON scanner, a token id array parser with an AVX2 kernel,
// and Parse, which reads from a /v1/chat/completions or /v1/completions
// body what routing needs: the model, the stream flags, the token caps,
// the prompt's token ids (kvrouter.token_ids, else an integer-array
// completions prompt, the first of a batch) or its text, the prompt's
// token count, the LoRA adapter and cache salt that seed the block
// hashes, and refusals naming the offending parameter for the OpenAI
// error body.
//
// Parse also reads the pass-through endpoints' bodies (Embeddings,
// Responses, Tokenize, Detokenize), the session body fields
// prompt_cache_key and user, and refuses prompt strings that are not
// UTF-8 (400 naming the parameter). Access (access.go, auth.go) is the
// one access control of both edges: client keys and operator
// credentials, compared by SHA-256 digest in constant time. ClientMessage
// keeps Go package prefixes out of client-facing messages.
//
// Around the parser, the rest of what both edges do alike, so that they
// cannot drift apart: the session headers and the binding key
// (SessionKeys.Read, Session.Key: the gateway homes a session by the key the
// node binds it by), the bounded, deadline-bound body read (BodyReader),
// the OpenAI error body (ErrorJSON, StreamErrorEvent), the error table
// type with the classes of this package's refusals (NewTable, Entry:
// each edge adds the rows of its own sentinels; Row.Retry gives a class
// its retry advice, which Class.Answer, the one writer of an error
// answer, sends as Retry-After), the route refusals
// (NoRoute) and a pool of token buffers (ParsePooled, Request.Release).
//
// Why it exists. Both edges read the whole body of every request before
// routing it, and a pre-tokenized prompt of a few thousand ids is tens of
// kilobytes of digits. encoding/json decoding such a body cost the gateway
// about 350 µs at the median on a 4,096-token prompt; this scanner decodes
// only the fields routing reads, skips (while validating) the rest in one
// pass, and converts ids eight at a time (SWAR), or 64 bytes at a time
// with AVX2 where the processor has it (tokens_amd64.s): a 12,288-id body
// parses in about 35 µs. relay/ must not import node/, so the code lives
// here, below both.
//
// One set of rules. Both edges refuse the same bodies with the same
// parameter names: every field routing reads is type-checked where it
// stands and the first fault in document order is reported, messages are
// serialised into Text, and text prompts count against the limit. The
// gateway used to apply looser rules (those of its encoding/json decoding);
// a body it let through was then refused by the router node behind it,
// one WAN round trip later, so the edge now refuses it at once.
//
// Guarantees. No input panics a parse or makes it read outside the body
// (a test parses bodies that end at an unmapped page). The scanner accepts
// exactly the documents encoding/json accepts, to the same nesting limit
// (MaxJSONDepth), and decodes strings as it does.
// Token ids are integers in [0, 2^32) written as encoding/json would
// accept them for a []uint32, with the same values; every token array of
// a prompt (each member of a batch) is held to Options.MaxPromptTokens.
// Every refusal is an *Error whose Kind is ErrMalformed, ErrInvalid or
// ErrPromptTooLong and whose Param names the parameter ("" for none).
// ParsePooled parses a pre-tokenized prompt into a pooled scratch buffer,
// allocating nothing once the buffer is large enough but the copy of a
// model name longer than one byte.
//
// Refusals. Parse does not tokenize text (ExactTokens does, on request,
// with the model's tokenizer), does not decode fields routing
// does not read, and does not rewrite or copy the body: Tokens may alias
// the scratch buffer and Text is a copy. It maps to HTTP status only its
// own refusals; an edge's sentinels are that edge's rows.
//
// Concurrency. Parse and ParsePooled keep no state between
// calls but the pool and may run concurrently; a scratch buffer belongs
// to one parse at a time. A Scanner and a Request belong to one
// goroutine. Tables, BodyReaders and the header lists are read-only. A
// BodyBudget (the process-wide bound on buffered body bytes, budget.go)
// is shared by every request and safe for concurrent use; a BodyHold
// belongs to its request.
package oaiedge
