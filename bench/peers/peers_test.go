package peers

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// smallShape is a fleet small enough for a unit test: three groups (the
// last one partial), every sequence queried at least once on average.
func smallShape() Shape {
	return Shape{Workers: 10, Group: 4, Prompts: 3, PromptBlocks: 2, Seqs: 6, SeqBlocks: 5, BlockTokens: 4, Queries: 60, Seed: 7}
}

func TestSubjectsAnswerTheExpectedPrefixes(t *testing.T) {
	st, err := NewStream(smallShape())
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{ModeKeys, ModeTokens} {
		for _, name := range Names() {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				s, err := NewSubject(name)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Prepare(st); err != nil {
					t.Fatal(err)
				}
				if err := s.Open(); err != nil {
					t.Fatal(err)
				}
				apply := s.Ingest
				if mode == ModeTokens {
					apply = s.IngestTokens
				}
				if _, err := ingest(st, apply); err != nil {
					t.Fatal(err)
				}
				for q, e := range st.Queries() {
					if err := s.Query(q); err != nil {
						t.Fatal(err)
					}
					if got, want := s.Answers(), st.Expected(e); !slices.Equal(got, want) {
						t.Fatalf("query %d (event %d): got %v, want %v", q, e, got, want)
					}
				}
			})
		}
	}
}

func TestMeasureReportsEveryFigure(t *testing.T) {
	st, err := NewStream(smallShape())
	if err != nil {
		t.Fatal(err)
	}
	var results []Result
	for round := 1; round <= 2; round++ {
		for _, mode := range []Mode{ModeKeys, ModeTokens} {
			for _, name := range Names() {
				res, err := Measure(name, mode, round, st)
				if err != nil {
					t.Fatalf("%s %s: %v", name, mode, err)
				}
				if res.BlockEventsPerSec <= 0 || res.Mismatches != 0 {
					t.Fatalf("%s %s: %+v", name, mode, res)
				}
				results = append(results, res)
			}
		}
	}
	var out bytes.Buffer
	if err := Report(&out, Config{Shape: st.Shape, Rounds: 2}, Env{PeerVersion: "v0.9.0"}, results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"seed 7", "v0.9.0", "find-matches, full hit, p99", "×)", "mismatches 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadInputIsRejected(t *testing.T) {
	bad := smallShape()
	bad.Seqs = 1
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"shape", bad.Validate(), ErrShape},
		{"subject", func() error { _, err := NewSubject("nope"); return err }(), ErrSubject},
		{"shape json", func() error { _, err := ParseShape("{"); return err }(), ErrShape},
		{"config", Config{Shape: smallShape()}.Validate(), ErrConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Fatalf("got %v, want %v", tt.err, tt.want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		in   []int
		p    float64
		want int
	}{
		{"empty", nil, 0.5, 0},
		{"median of odd", []int{5, 1, 3}, 0.5, 3},
		{"p99 of 100", seq(100), 0.99, 99},
		{"p50 of 100", seq(100), 0.50, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lat := make([]time.Duration, len(tt.in))
			for i, v := range tt.in {
				lat[i] = time.Duration(v)
			}
			if got := percentile(lat, tt.p); got != time.Duration(tt.want) {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}
