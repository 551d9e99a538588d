package tokenize

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// benchBlockSize is the engines' usual KV block size.
const benchBlockSize = 16

// benchRequest is the 12,288-token chat prompt (Qwen 3) that both this
// benchmark and testdata/gen/bench.mjs time: a system prompt and one user
// message built from the corpus pieces.
func benchRequest(tb testing.TB) ChatRequest {
	user := corpusPrompt(loadPieces(tb), benchSeed, benchPieces)
	msgs, _ := json.Marshal([]map[string]string{
		{"role": "system", "content": "You are a helpful assistant."},
		{"role": "user", "content": user},
	})
	return ChatRequest{Messages: msgs, AddGenerationPrompt: true}
}

// BenchmarkChatPrompt times what routing needs from a chat request:
// template, tokens, block hashes. It reports the distribution of single
// calls (p50-ns, p99-ns) in steady state, with the word cache warm.
func BenchmarkChatPrompt(b *testing.B) {
	tok := loadFamily(b, "qwen3")
	req := benchRequest(b)
	var ids []uint32
	var hashes []routing.SeqHash
	run := func() {
		var err error
		ids, err = tok.EncodeChat(req, ids[:0])
		if err == nil {
			hashes, err = routing.BlockHashes(hashes[:0], ids, benchBlockSize, routing.HashSeed)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	run()
	times := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		run()
		times = append(times, time.Since(t0))
	}
	reportQuantiles(b, times)
	b.ReportMetric(float64(len(ids)), "tokens")
}

// BenchmarkEncodeOnly is BenchmarkChatPrompt's tokenization alone, on the
// rendered prompt.
func BenchmarkEncodeOnly(b *testing.B) {
	tok := loadFamily(b, "qwen3")
	text, err := tok.ApplyChatTemplate(benchRequest(b))
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(text, false, nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		ids = tok.Encode(text, false, ids[:0])
	}
	b.ReportMetric(float64(len(ids)), "tokens")
}

// BenchmarkReference runs the same prompt through the reference
// (transformers.js, testdata/gen/bench.mjs) in the same run, when node and
// the generator's packages are installed; it reports the reference's own
// timing of single calls.
func BenchmarkReference(b *testing.B) {
	if _, err := os.Stat("testdata/gen/node_modules/@huggingface/transformers"); err != nil {
		b.Skip("reference not installed: cd tokenize/testdata/gen && npm ci --ignore-scripts")
	}
	out, err := exec.Command("node", "testdata/gen/bench.mjs", "qwen3", "200").Output()
	if err != nil {
		b.Fatal(err)
	}
	var r struct {
		P50    float64 `json:"p50_ns"`
		P99    float64 `json:"p99_ns"`
		Tokens float64 `json:"tokens"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
	}
	b.ReportMetric(r.P50, "p50-ns")
	b.ReportMetric(r.P99, "p99-ns")
	b.ReportMetric(r.Tokens, "tokens")
}

func reportQuantiles(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	q := func(p float64) float64 { return float64(times[min(len(times)-1, int(p*float64(len(times))))]) }
	b.ReportMetric(q(0.5), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
}
