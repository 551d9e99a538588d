package gen

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/traces"
)

// Every workload is a valid Mooncake trace, reproducible from its seed,
// different for another seed, and reads back as written.
func TestWorkloadsRoundTrip(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			a, err := Generate(name, 1)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Generate(name, 1)
			c, _ := Generate(name, 2)
			if len(a) < 1000 || !equal(a, b) || equal(a, c) {
				t.Fatalf("%d requests; same seed equal %v, other seed equal %v", len(a), equal(a, b), equal(a, c))
			}
			var buf bytes.Buffer
			if err := Write(&buf, a); err != nil {
				t.Fatal(err)
			}
			back, err := traces.ReadBytes(buf.Bytes())
			if err != nil || !equal(a, back) {
				t.Fatalf("read back: %v (equal %v)", err, equal(a, back))
			}
			for _, r := range a {
				if len(r.HashIDs) != (r.InputTokens+511)/512 || r.OutputTokens < 1 {
					t.Fatalf("record %+v", r)
				}
			}
		})
	}
}

func equal(a, b []traces.Request) bool {
	return slices.EqualFunc(a, b, func(x, y traces.Request) bool {
		return x.Arrival == y.Arrival && x.InputTokens == y.InputTokens && x.OutputTokens == y.OutputTokens &&
			slices.Equal(x.HashIDs, y.HashIDs)
	})
}

// A chat turn resends the previous turn's complete blocks as its prefix.
func TestChatTurnsExtendTheConversation(t *testing.T) {
	c := DefaultChat()
	c.MeanTurns = 50
	g := &ids{}
	reqs := c.conversation(rng(3, NameChat), g, g.segment(c.SystemTokens), time.Second, nil)
	if len(reqs) < 2 {
		t.Fatalf("%d turns", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		prev, cur := reqs[i-1], reqs[i]
		full := prev.InputTokens / 512
		if !slices.Equal(prev.HashIDs[:full], cur.HashIDs[:full]) || cur.InputTokens <= prev.InputTokens {
			t.Fatalf("turn %d does not extend turn %d", i, i-1)
		}
	}
}

func TestBadParameters(t *testing.T) {
	chat := DefaultChat()
	chat.MeanTurns = 0.5
	rag := DefaultRAG()
	rag.PerRequest = rag.Documents + 1
	tenants := DefaultTenants()
	tenants.Popularity = 1
	agentic := DefaultAgentic()
	agentic.ToolTokens.Median = 0
	tests := []struct {
		name string
		gen  func() ([]traces.Request, error)
	}{
		{"chat turns", func() ([]traces.Request, error) { return chat.Generate(1) }},
		{"rag per request", func() ([]traces.Request, error) { return rag.Generate(1) }},
		{"tenants popularity", func() ([]traces.Request, error) { return tenants.Generate(1) }},
		{"agentic tool tokens", func() ([]traces.Request, error) { return agentic.Generate(1) }},
		{"unknown workload", func() ([]traces.Request, error) { return Generate("batch", 1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.gen(); !errors.Is(err, ErrParams) {
				t.Fatalf("err = %v, want ErrParams", err)
			}
		})
	}
}
