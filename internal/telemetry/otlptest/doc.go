// Package otlptest is an in-process OTLP trace receiver for tests: one
// Collector serves OTLP/gRPC and OTLP/HTTP (protobuf) on loopback and keeps
// every span it receives, with the service.name of the resource that sent
// it, so that a test can check what a process exported and how its spans
// link up.
//
// Concurrency: a Collector is safe for concurrent use; Close stops both
// servers and waits for them.
package otlptest
