package mocker

import (
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"pgregory.net/rapid"
)

func defaultTiming() Timing {
	var c Config
	c.EnsureDefaults()
	return c.Timing
}

// TestTimingReferenceFigures pins the defaults to the public rough figures
// the doc derives them from.
func TestTimingReferenceFigures(t *testing.T) {
	tm := defaultTiming()
	chunk := tm.IterationTime(Batch{PrefillTokens: 8192, AttentionPairs: ChunkPairs(0, 8192)})
	if rate := 8192 / chunk.Seconds(); rate < 20000 || rate > 30000 {
		t.Errorf("short-context prefill %.0f tokens/s, want 20k-30k", rate)
	}
	small := tm.IterationTime(Batch{Decodes: 1, DecodeContext: 1000})
	if small < 6*time.Millisecond || small > 8*time.Millisecond {
		t.Errorf("small decode step %v, want 6-8 ms", small)
	}
	big := tm.IterationTime(Batch{Decodes: 64, DecodeContext: 64 * 16384})
	if big < 40*time.Millisecond || big > 80*time.Millisecond {
		t.Errorf("64 decodes at 16k context %v, want 40-80 ms", big)
	}
}

func TestChunkPairs(t *testing.T) {
	tests := []struct {
		name       string
		context, n int
		want       int64
	}{
		{name: "one token", context: 0, n: 1, want: 1},
		{name: "causal", context: 0, n: 4, want: 10},
		{name: "with context", context: 10, n: 2, want: 23},
		{name: "chunks add up", context: 8192, n: 8192, want: ChunkPairs(0, 16384) - ChunkPairs(0, 8192)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChunkPairs(tc.context, tc.n); got != tc.want {
				t.Fatalf("ChunkPairs(%d, %d) = %d, want %d", tc.context, tc.n, got, tc.want)
			}
		})
	}
}

// TestIterationTimeMonotonic checks that adding work to any field of a batch
// never makes it faster.
func TestIterationTimeMonotonic(t *testing.T) {
	tm := defaultTiming()
	rapid.Check(t, func(t *rapid.T) {
		b := Batch{
			PrefillTokens:  rapid.Int64Range(0, 1<<20).Draw(t, "prefill"),
			AttentionPairs: rapid.Int64Range(0, 1<<40).Draw(t, "pairs"),
			Decodes:        rapid.Int64Range(0, 512).Draw(t, "decodes"),
			DecodeContext:  rapid.Int64Range(0, 1<<27).Draw(t, "context"),
		}
		more := b
		d := rapid.Int64Range(1, 1<<16).Draw(t, "delta")
		switch rapid.IntRange(0, 3).Draw(t, "field") {
		case 0:
			more.PrefillTokens += d
		case 1:
			more.AttentionPairs += d
		case 2:
			more.Decodes += d
		case 3:
			more.DecodeContext += d
		}
		if tm.IterationTime(more) < tm.IterationTime(b) {
			t.Fatalf("%+v took %v, less than %+v at %v", more, tm.IterationTime(more), b, tm.IterationTime(b))
		}
	})
}

// TestLongerPromptNotFaster checks end to end that a longer prompt never
// gets its first token sooner, across chunk boundaries.
func TestLongerPromptNotFaster(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.IntRange(1, 40000).Draw(t, "prompt")
		k := rapid.IntRange(1, 9000).Draw(t, "extra")
		if a, b := ttftAlone(t, p), ttftAlone(t, p+k); b < a {
			t.Fatalf("prompt %d: TTFT %v; prompt %d: TTFT %v", p, a, p+k, b)
		}
	})
}

func ttftAlone(t *rapid.T, prompt int) time.Duration {
	e, err := New(Config{}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{ID: "a", PromptTokens: prompt, Locals: make([]routing.LocalHash, prompt/64), MaxTokens: 1}
	for i := range req.Locals {
		req.Locals[i] = routing.LocalHash(i + 1)
	}
	if err := e.Submit(req, t0); err != nil {
		t.Fatal(err)
	}
	res := e.Advance(t0.Add(time.Hour))
	if len(res.Finished) != 1 {
		t.Fatalf("finished %+v", res.Finished)
	}
	return res.Finished[0].TTFT()
}

func TestSpeedUpScalesTime(t *testing.T) {
	run := func(speed float64) time.Duration {
		e, err := New(Config{SpeedUp: speed}, testWorker)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Submit(Request{ID: "a", PromptTokens: 20000, Locals: make([]routing.LocalHash, 312), MaxTokens: 50}, t0); err != nil {
			t.Fatal(err)
		}
		res := e.Advance(t0.Add(time.Hour))
		return res.Finished[0].Done.Sub(t0)
	}
	slow, fast := run(1), run(10)
	if ratio := float64(slow) / float64(fast); ratio < 9.9 || ratio > 10.1 {
		t.Fatalf("speed-up 10 gave ratio %.3f (%v vs %v)", ratio, slow, fast)
	}
}

func TestDurationEdges(t *testing.T) {
	huge := Timing{TokenNanos: 1e300}.IterationTime(Batch{PrefillTokens: 1 << 40})
	if huge != time.Duration(1<<63-1) {
		t.Fatalf("overflowing batch took %v", huge)
	}
	if got := scaled(time.Nanosecond, 1e9); got != time.Nanosecond {
		t.Fatalf("scaled to %v, want time to keep moving", got)
	}
	c := Completion{FirstToken: t0, Done: t0.Add(time.Second), OutputTokens: 1}
	if c.MeanITL() != 0 {
		t.Fatalf("single-token ITL %v", c.MeanITL())
	}
	c.OutputTokens = 5
	if c.MeanITL() != 250*time.Millisecond {
		t.Fatalf("ITL %v", c.MeanITL())
	}
}
