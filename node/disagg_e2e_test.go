package node_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/freeport"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/node"
)

// startDisaggFleet starts a node (its configuration adjusted by tweak,
// which may be nil) with prefill engines 1 and 2 and decode engines 3 and
// 4; with sglang, the prefill engines hand off SGLang's way.
func startDisaggFleet(t *testing.T, sglang bool, tweak func(*node.Config)) *fleet {
	t.Helper()
	f := startFleet(t, 0, tweak)
	for id := uint64(1); id <= 4; id++ {
		f.serveEngineWith(id, f.listen(), func(c *server.Config) {
			c.Role = "decode"
			if id <= 2 {
				c.Role = "prefill"
			}
			if id <= 2 && sglang {
				addr, err := freeport.Loopback()
				if err != nil {
					t.Fatal(err)
				}
				_, port, _ := net.SplitHostPort(addr)
				c.BootstrapPort, _ = strconv.Atoi(port)
			}
		})
	}
	f.waitEngines(4)
	return f
}

// streamPair streams a completion of tokens and returns the decode and
// prefill engines that served it, failing the test unless the whole
// answer came.
func (f *fleet) streamPair(tokens []int) (decode, prefill string) {
	f.t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": tokens, "max_tokens": 8, "stream": true})
	resp, err := http.Post(f.base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		done = done || sc.Text() == "data: [DONE]"
	}
	if resp.StatusCode != 200 || !done {
		f.t.Fatalf("status %d, stream complete %v", resp.StatusCode, done)
	}
	return resp.Header.Get("X-Kvrouter-Worker"), resp.Header.Get("X-Kvrouter-Prefill-Worker")
}

// TestDisaggEndToEnd: through a node, every request of a model with
// prefill and decode engines is served by one of each, over vLLM's
// hand-off and SGLang's; a prompt sharing a prefix goes to the prefill
// engine that cached it.
func TestDisaggEndToEnd(t *testing.T) {
	for _, sglang := range []bool{false, true} {
		t.Run("sglang="+strconv.FormatBool(sglang), func(t *testing.T) {
			f := startDisaggFleet(t, sglang, nil)
			decode, prefill := f.streamPair(seq(1000, 256))
			if !strings.HasPrefix(decode, "3/") && !strings.HasPrefix(decode, "4/") {
				t.Fatalf("decode engine %q", decode)
			}
			if !strings.HasPrefix(prefill, "1/") && !strings.HasPrefix(prefill, "2/") {
				t.Fatalf("prefill engine %q", prefill)
			}
			// Prefill and decode engines both publish the prompt's blocks.
			f.waitCached(seq(1000, 256), prefill)
			f.waitCached(seq(1000, 256), decode)
			// Each prefill's load is off its engine before the next request,
			// booked and reported: with SGLang's hand-off the prefill
			// engine's own response can end after the client's.
			shared := append(seq(1000, 240), seq(90000, 64)...)
			for range 3 {
				f.waitPrefillsDone()
				f.waitEnginesIdle()
				_, again := f.streamPair(shared)
				if again != prefill {
					t.Fatalf("shared prefix prefilled on %s, want the caching %s; explain now: %s; reports %s", again, prefill, f.explain(shared), f.reports())
				}
			}
		})
	}
}

// TestDisaggDecodeFallbackEndToEnd: decode engines alone serve whole
// requests (the decode fallback, on by default).
func TestDisaggDecodeFallbackEndToEnd(t *testing.T) {
	f := startFleet(t, 0, nil)
	f.serveEngineWith(3, f.listen(), func(c *server.Config) { c.Role = "decode" })
	f.waitEngines(1)
	decode, prefill := f.streamPair(seq(1, 64))
	if !strings.HasPrefix(decode, "3/") || prefill != "" {
		t.Fatalf("served by %q with prefill %q", decode, prefill)
	}
}

// reports is every engine's last reported load, for failure messages.
func (f *fleet) reports() string {
	var b strings.Builder
	for _, e := range f.node.EngineRegistry().Engines() {
		fmt.Fprintf(&b, "%d:%+v ", e.ID, e.Loads)
	}
	return b.String()
}
