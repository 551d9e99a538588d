package oaiedge

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// tokenBody is a completions body with n pre-tokenized prompt ids of a
// 50k vocabulary, as a client serialises them.
func tokenBody(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	b := []byte(`{"model":"m","max_tokens":16,"prompt":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(rng.IntN(50000)), 10)
	}
	return append(b, "]}"...)
}

// BenchmarkParse measures a pre-tokenized completions body of 4,096 and
// 12,288 ids, parsed into a recycled scratch buffer the way both edges
// parse.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{4096, 12288} {
		body := tokenBody(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			benchParse(b, body, Options{MaxPromptTokens: 1 << 20})
		})
	}
}

// BenchmarkParsePortable is BenchmarkParse's 12,288-id case without
// the vector parser, in the same run.
func BenchmarkParsePortable(b *testing.B) {
	saved := useAVX2
	defer func() { useAVX2 = saved }()
	useAVX2 = false
	benchParse(b, tokenBody(12288), Options{MaxPromptTokens: 1 << 20})
}

func benchParse(b *testing.B, body []byte, o Options) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var scratch []uint32
	for b.Loop() {
		r, err := parseReusing(body, Completions, o, scratch)
		if err != nil {
			b.Fatal(err)
		}
		scratch = r.scratch
	}
}
