// Package metrics defines every Prometheus metric of a router node in one
// place, with help text and units in the names
// (kvrouter_<subsystem>_<thing>_<unit>). Components receive a *Metrics and
// record through its fields; nothing registers metrics elsewhere.
//
// Label cardinality is bounded: labels carry model names, worker ids and
// ranks of registered engines, outcomes and event kinds, never request or
// session ids. The reference router's families (dynamo_component_router_*,
// dynamo_router_overhead_*, dynamo_frontend_worker_*, ...) are exported
// beside kvrouter's, read at scrape time from the kvrouter family behind
// each (reference.go), so no component records anything twice; the
// dispatcher's own sets (Queue, Decisions) carry theirs
// (reference_router.go). A nil *Metrics is valid and records nothing, so library code
// and tests need not build one.
//
// Every family is registered through Metrics.Registerer, which adds the
// set's constant labels (WithConstLabels: a node's dc and node) and keeps
// the family in the catalogue: docs/metrics.md is generated from it (see
// TestMetricsDoc), and the lint test checks every family, series or not,
// against promlint's rules (what `promtool check metrics` checks).
// Families are named in base units (seconds, not milliseconds).
//
// Concurrency: safe for concurrent use (Prometheus collectors are).
package metrics

//go:generate env KVRTEST_UPDATE_DOCS=1 go test -run TestMetricsDoc .
