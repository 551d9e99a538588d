// Package node assembles one router node of a DC: a NATS connection (to an
// embedded or external server), the event plane that learns engines and
// their KV caches from it, the decision path (exact or approximate index,
// load tracker, policy pipeline, session affinity) and the OpenAI-compatible
// HTTP frontend in front of them, plus metrics and optional OTLP tracing.
//
// Lifecycle: New validates the configuration and builds every component
// without starting anything; Run connects, starts the components, serves
// until its context ends, then stops them in reverse order and waits for
// every goroutine. A node is ready (GET /ready) once at least one engine is
// registered.
//
// The node keeps bindings, ownership and the engine registry in memory for
// now; each sits behind an interface (dispatch.Bindings, the index, the
// eventplane registry) that a replicated store can implement.
//
// Concurrency: Run may be called once. Addr is safe to call from any
// goroutine after Run has started listening (WaitReady reports when).
package node
