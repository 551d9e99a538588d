package peers

import (
	"errors"
	"fmt"
	"slices"
)

// ErrSubject reports an unknown subject name.
var ErrSubject = errors.New("peers: unknown subject")

// Subject is one index under test, driven through its own API. Prepare
// runs untimed; Ingest, IngestTokens and Query are what is timed.
type Subject interface {
	// Prepare computes, from the stream's tokens, the subject's keys of
	// every event and every query, so that Ingest and Query measure the
	// index alone.
	Prepare(st *Stream) error
	// Open creates an empty index, dropping any previous one.
	Open() error
	// Ingest applies stored event e with its prepared keys.
	Ingest(e int) error
	// IngestTokens hashes event e's tokens into the subject's keys, then
	// applies it: the ingestion path from an engine event that carries
	// token ids.
	IngestTokens(e int) error
	// HashQuery computes the keys of query q from its tokens (timed apart
	// from the lookup, for reference).
	HashQuery(q int) error
	// Query answers query q from its prepared keys.
	Query(q int) error
	// Answers returns the last query's answers sorted by worker.
	Answers() []Answer
}

// Subject names, in the order a round runs them.
const (
	NameKVRouter = "kvrouter"
	NameLLMDMem  = "llmd-mem"
	NameLLMDCost = "llmd-cost"
)

// Names lists every subject in run order; kvrouter first, as the baseline.
func Names() []string { return []string{NameKVRouter, NameLLMDMem, NameLLMDCost} }

// NewSubject returns the subject with the given name.
func NewSubject(name string) (Subject, error) {
	switch name {
	case NameKVRouter:
		return &kvrSubject{}, nil
	case NameLLMDMem:
		return newLLMD(llmdInMemory), nil
	case NameLLMDCost:
		return newLLMD(llmdCostAware), nil
	}
	return nil, fmt.Errorf("%w: %q (want one of %v)", ErrSubject, name, Names())
}

// sortAnswers orders answers by worker so that subjects compare equal.
func sortAnswers(a []Answer) {
	slices.SortFunc(a, func(x, y Answer) int { return x.Worker - y.Worker })
}
