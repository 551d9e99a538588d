package gen

import (
	"time"

	"github.com/kvrouter/kvrouter/traces"
)

// RAG is retrieval-augmented generation: every request is a shared system
// prompt, then the documents a retriever returned for the question, most
// relevant first, then the question. Popular documents come back for many
// questions but in different orders, so two requests share a prefix only
// as far as their leading documents agree.
type RAG struct {
	// Duration is the span of the trace. Default 10 minutes.
	Duration time.Duration
	// RequestsPerSecond is the arrival rate. Default 10, about 55k prompt
	// tokens/s with the lengths below.
	RequestsPerSecond float64
	// SystemBlocks is the shared system prompt, in 512-token blocks.
	// Default 1.
	SystemBlocks int
	// Documents is the corpus size; each document is 1 to DocumentBlocks
	// blocks long (uniform), whole blocks so that a document is the same
	// blocks wherever it appears. Defaults 2,000 and 4.
	Documents      int
	DocumentBlocks int
	// Popularity is the power law exponent (> 1) of retrieval: how often
	// the most relevant documents come back. Default 1.1.
	Popularity float64
	// PerRequest is the number of documents retrieved. Default 4.
	PerRequest int
	// QuestionTokens and OutputTokens are the question and the answer.
	// Defaults: medians 80 and 250 tokens.
	QuestionTokens LogNormal
	OutputTokens   LogNormal
}

// DefaultRAG returns the published parameters of the RAG workload.
func DefaultRAG() RAG {
	return RAG{
		Duration: 10 * time.Minute, RequestsPerSecond: 10, SystemBlocks: 1, Documents: 2000, DocumentBlocks: 4,
		Popularity: 1.1, PerRequest: 4,
		QuestionTokens: LogNormal{Median: 80, Sigma: 0.6, Min: 4, Max: 2000},
		OutputTokens:   LogNormal{Median: 250, Sigma: 0.6, Min: 1, Max: 4000},
	}
}

func (q RAG) validate() error {
	if err := positive(map[string]float64{"duration": float64(q.Duration), "requests_per_second": q.RequestsPerSecond,
		"system_blocks": float64(q.SystemBlocks), "documents": float64(q.Documents),
		"document_blocks": float64(q.DocumentBlocks), "per_request": float64(q.PerRequest)}); err != nil {
		return err
	}
	if !(q.Popularity > 1) || q.PerRequest > q.Documents || q.Documents < 2 {
		return errorf("popularity must be > 1 and 2 <= per_request <= documents")
	}
	for name, d := range map[string]LogNormal{"question_tokens": q.QuestionTokens, "output_tokens": q.OutputTokens} {
		if err := d.validate(name); err != nil {
			return err
		}
	}
	return nil
}

// Generate returns the trace of the given seed.
func (q RAG) Generate(seed uint64) ([]traces.Request, error) {
	if err := q.validate(); err != nil {
		return nil, err
	}
	r := rng(seed, NameRAG)
	g := &ids{}
	system := g.segment(q.SystemBlocks * traces.MooncakeBlockTokens)
	docs := make([]segment, q.Documents)
	for i := range docs {
		docs[i] = g.segment((1 + r.IntN(q.DocumentBlocks)) * traces.MooncakeBlockTokens)
	}
	pick := zipf(r, q.Popularity, q.Documents)
	var out []traces.Request
	for _, at := range poisson(r, q.RequestsPerSecond, q.Duration) {
		var p prompt
		p.share(g, system)
		for _, d := range distinct(pick, q.PerRequest) {
			p.share(g, docs[d])
		}
		p.add(g, q.QuestionTokens.draw(r))
		out = append(out, p.request(g, at, q.OutputTokens.draw(r)))
	}
	return sorted(out), nil
}

// distinct draws n different documents; the draw order is the retrieval
// order, so a popular document leads some prompts and follows in others.
func distinct(pick func() int, n int) []int {
	out := make([]int, 0, n)
	for len(out) < n {
		d := pick()
		dup := false
		for _, x := range out {
			dup = dup || x == d
		}
		if !dup {
			out = append(out, d)
		}
	}
	return out
}
