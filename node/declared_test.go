package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/fleet/declared"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/node"
)

// stockEngine is an OpenAI-compatible server with no kvrouter code: the
// endpoints a stock vLLM server has, answering completions itself.
func stockEngine(t *testing.T, blockSize int) (*httptest.Server, *atomic.Int64) {
	var served atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q}]}`, model)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "vllm:cache_config_info{block_size=\"%d\",num_gpu_blocks=\"512\"} 1\n", blockSize)
	})
	for _, p := range []string{"POST /v1/completions", "POST /v1/chat/completions"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) {
			served.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c1","object":"text_completion","choices":[{"index":0,"text":"hi","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		})
	}
	// The caller closes it before the fleet's leak check runs.
	return httptest.NewServer(mux), &served
}

func TestDeclaredEngineIsRouted(t *testing.T) {
	eng, served := stockEngine(t, 16)
	wrong, _ := stockEngine(t, 32)
	defer eng.Close()
	defer wrong.Close()
	f := startFleet(t, 0, func(c *node.Config) {
		c.Engines = []string{"url=" + eng.URL + ",block-size=16", "url=" + wrong.URL + ",block-size=16"}
	})
	f.waitEngines(1)
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": seq(1, 40), "max_tokens": 1})
	resp, err := http.Post(f.base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || served.Load() != 1 {
		t.Fatalf("status %d, engine served %d", resp.StatusCode, served.Load())
	}
	// The two engines are probed independently: the good one being routed
	// says nothing about whether the other's probe has ended yet.
	waittest.Until(t, 10*time.Second, "the engine whose block size differs from its declaration counted as a probe failure", func() bool {
		return testutil.ToFloat64(f.node.Metrics().EngineProbeFailures.WithLabelValues(declared.ReasonBlockSize)) > 0
	})
}

func TestDeclaredEngineConfigErrorsNameTheOption(t *testing.T) {
	for _, tc := range []struct{ engines, dns []string }{
		{engines: []string{"url=http://a,blocksize=4"}},
		{dns: []string{"name=a,srv=b"}},
	} {
		cfg := node.DefaultConfig()
		cfg.Engines, cfg.EngineDNS = tc.engines, tc.dns
		if _, err := node.New(cfg, nil); err == nil {
			t.Fatalf("%+v: no error", tc)
		} else if want := map[bool]string{true: "engine ", false: "engine_dns "}[tc.engines != nil]; !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Fatalf("err = %v, want it to name %q", err, want)
		}
	}
}
