package peers

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/go-logr/logr"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Mode says what one measurement process times.
type Mode string

// The modes: ingestion of prepared keys with heap and queries, or
// ingestion that hashes each event's tokens first.
const (
	ModeKeys   Mode = "keys"
	ModeTokens Mode = "tokens"
)

// ErrMode reports an unknown mode.
var ErrMode = errors.New("peers: unknown mode")

// hashSamples is how many queries are hashed for the reference figure.
const hashSamples = 2000

// Result is one subject's figures from one measurement process.
type Result struct {
	Subject string
	Mode    Mode
	Round   int
	// BlockEventsPerSec is block events ingested per second, the whole
	// stream applied in order by one goroutine.
	BlockEventsPerSec float64
	// FixedBytes is the heap in use of the empty index (keys mode).
	FixedBytes int64
	// InuseBytesPerPair and LiveBytesPerPair are the heap growth from
	// before the index was created to after every event was applied, each
	// after a GC, per (worker, block) pair: heap in use (spans) and live
	// objects.
	InuseBytesPerPair float64
	LiveBytesPerPair  float64
	// Query latencies of individually timed calls, and of hashing a query.
	QueryP50, QueryP99, QueryMean, HashP50 time.Duration
	// Checked and Mismatches count answers compared with the expectation.
	Checked, Mismatches int
	FirstMismatch       string
}

// heap is one reading of the heap after a GC.
type heap struct{ inuse, live int64 }

func readHeap() heap {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return heap{inuse: int64(m.HeapInuse), live: int64(m.HeapAlloc)}
}

// Measure runs one subject in one mode over the stream. It is meant to run
// alone in its process (see the package doc).
func Measure(name string, mode Mode, round int, st *Stream) (Result, error) {
	crlog.SetLogger(logr.Discard())
	res := Result{Subject: name, Mode: mode, Round: round}
	s, err := NewSubject(name)
	if err != nil {
		return res, err
	}
	if err := s.Prepare(st); err != nil {
		return res, err
	}
	switch mode {
	case ModeKeys:
		return res, measureKeys(s, st, &res)
	case ModeTokens:
		if err := s.Open(); err != nil {
			return res, err
		}
		res.BlockEventsPerSec, err = ingest(st, s.IngestTokens)
		return res, err
	}
	return res, fmt.Errorf("%w: %q", ErrMode, mode)
}

func measureKeys(s Subject, st *Stream, res *Result) error {
	before := readHeap()
	if err := s.Open(); err != nil {
		return err
	}
	empty := readHeap()
	var err error
	if res.BlockEventsPerSec, err = ingest(st, s.Ingest); err != nil {
		return err
	}
	full := readHeap()
	pairs := float64(st.Shape.Pairs())
	res.FixedBytes = empty.inuse - before.inuse
	res.InuseBytesPerPair = float64(full.inuse-before.inuse) / pairs
	res.LiveBytesPerPair = float64(full.live-before.live) / pairs
	if err := timeQueries(s, st, res); err != nil {
		return err
	}
	return timeHashing(s, st, res)
}

// ingest applies every event in order and returns block events per second.
func ingest(st *Stream, apply func(int) error) (float64, error) {
	start := time.Now()
	for e := range st.Shape.Events() {
		if err := apply(e); err != nil {
			return 0, fmt.Errorf("event %d: %w", e, err)
		}
	}
	return float64(st.Shape.Blocks()) / time.Since(start).Seconds(), nil
}

// timeQueries times each query alone and checks every answer.
func timeQueries(s Subject, st *Stream, res *Result) error {
	lat := make([]time.Duration, len(st.Queries()))
	var total time.Duration
	for q, e := range st.Queries() {
		start := time.Now()
		err := s.Query(q)
		lat[q] = time.Since(start)
		if err != nil {
			return fmt.Errorf("query %d: %w", q, err)
		}
		total += lat[q]
		res.Checked++
		if got, want := s.Answers(), st.Expected(e); !slices.Equal(got, want) {
			if res.Mismatches == 0 {
				res.FirstMismatch = fmt.Sprintf("query %d (event %d): got %v, want %v", q, e, got, want)
			}
			res.Mismatches++
		}
	}
	res.QueryP50, res.QueryP99 = percentile(lat, 0.50), percentile(lat, 0.99)
	res.QueryMean = total / time.Duration(len(lat))
	return nil
}

// timeHashing times computing the keys of the first queries from tokens.
func timeHashing(s Subject, st *Stream, res *Result) error {
	lat := make([]time.Duration, min(hashSamples, len(st.Queries())))
	for q := range lat {
		start := time.Now()
		if err := s.HashQuery(q); err != nil {
			return fmt.Errorf("hash query %d: %w", q, err)
		}
		lat[q] = time.Since(start)
	}
	res.HashP50 = percentile(lat, 0.50)
	return nil
}

// percentile sorts lat in place and returns its p-quantile (nearest rank).
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	i := int(p*float64(len(lat))+0.5) - 1
	return lat[max(0, min(i, len(lat)-1))]
}
