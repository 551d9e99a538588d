// Command peers compares kvrouter's exact prefix index with llm-d's
// KV-block indexes on one event stream and one query sequence, and prints
// a table (see package peers). Run it with `make bench-peers`.
package main
