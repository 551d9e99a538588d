package node_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/node"
)

func TestTextPromptsAreRoutedByTheModelsTokens(t *testing.T) {
	eng, served := stockEngine(t, 16)
	defer eng.Close()
	f := startFleet(t, 0, func(c *node.Config) {
		c.Engines = []string{"url=" + eng.URL + ",block-size=16"}
		c.Tokenizers = []string{model + "=../tokenize/testdata/qwen3"}
	})
	f.waitEngines(1)
	post := func(path string, body map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(f.base+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	post("/v1/chat/completions", map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "Hello there"}}})
	post("/v1/completions", map[string]any{"model": model, "prompt": "Once upon a time"})
	post("/v1/completions", map[string]any{"model": model, "prompt": []int{1, 2, 3}})
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": strings.Repeat("Hello there. ", 40)}}})
	resp, err := http.Post(f.base+"/v1/route/explain", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Tokens  string `json:"tokens"`
		Blocks  int    `json:"blocks"`
		Engines []struct {
			Engine string `json:"engine"`
		} `json:"engines"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ex)
	resp.Body.Close()
	if err != nil || ex.Tokens != "exact" || ex.Blocks < 5 || len(ex.Engines) != 1 {
		t.Fatalf("explain: %+v, %v", ex, err)
	}
	m := f.node.Metrics().Tokenized
	if exact, client := testutil.ToFloat64(m.WithLabelValues("exact")), testutil.ToFloat64(m.WithLabelValues("client")); exact != 3 || client != 1 || served.Load() != 3 {
		t.Fatalf("exact %v, client %v, served %d", exact, client, served.Load())
	}
}

func TestTokenizerConfigErrorsNameTheOption(t *testing.T) {
	for _, entry := range []string{"no-equals", "m=/nonexistent/dir"} {
		cfg := node.DefaultConfig()
		cfg.Tokenizers = []string{entry}
		if _, err := node.New(cfg, nil); err == nil || !strings.Contains(err.Error(), "tokenizer") {
			t.Fatalf("%q: err = %v", entry, err)
		}
	}
}
