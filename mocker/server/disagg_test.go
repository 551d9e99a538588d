package server

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/freeport"
)

// prompt20 is a completion body of 20 tokens (two blocks of 16, the
// second partial), with the given hand-off fields spliced in.
func prompt20(extra string) string {
	ids, _ := json.Marshal(tokenRange(100, 20))
	return fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":4%s}`, testModel, ids, extra)
}

// TestDisaggVLLMHandoff: a prefill engine answers a do_remote_decode
// request with kv_transfer_params naming itself and one block id per
// prompt block; a decode engine given them back serves the request; both
// cards declare their role.
func TestDisaggVLLMHandoff(t *testing.T) {
	checkLeaks(t)
	pre := startEngine(t, func(c *Config) { c.Role = "prefill" }, nil)
	dec := startEngine(t, func(c *Config) { c.Role = "decode"; c.EngineID = 43 }, nil)
	if pre.srv.Card().WorkerType != "prefill" || dec.srv.Card().WorkerType != "decode" {
		t.Fatalf("cards %q %q", pre.srv.Card().WorkerType, dec.srv.Card().WorkerType)
	}
	status, body := pre.post("/v1/completions", strings.Replace(prompt20(`,"kv_transfer_params":{"do_remote_decode":true}`), `"max_tokens":4`, `"max_tokens":1`, 1), nil)
	if status != 200 {
		t.Fatalf("prefill %d %s", status, body)
	}
	var answer struct {
		Params struct {
			DoRemotePrefill bool     `json:"do_remote_prefill"`
			EngineID        string   `json:"remote_engine_id"`
			BlockIDs        []uint64 `json:"remote_block_ids"`
			Host            string   `json:"remote_host"`
			Port            int      `json:"remote_port"`
		} `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		t.Fatal(err)
	}
	p := answer.Params
	if !p.DoRemotePrefill || p.EngineID != "42" || len(p.BlockIDs) != 2 || p.Host != "127.0.0.1" || p.Port == 0 {
		t.Fatalf("hand-off %+v", p)
	}
	params, _ := json.Marshal(map[string]any{"do_remote_prefill": true, "do_remote_decode": false, "remote_engine_id": p.EngineID,
		"remote_block_ids": p.BlockIDs, "remote_host": p.Host, "remote_port": p.Port})
	status, body = dec.post("/v1/completions", prompt20(`,"kv_transfer_params":`+string(params)), nil)
	if status != 200 || !strings.Contains(body, expectedText(4)) {
		t.Fatalf("decode %d %s", status, body)
	}
}

// TestDisaggDecodeRejectsBadHandoff: a hand-off a decode engine cannot use
// is refused with 400 naming what is wrong, and a hop sent to an engine of
// the other role likewise.
func TestDisaggDecodeRejectsBadHandoff(t *testing.T) {
	dec := startHarness(t, func(c *Config) { c.Role = "decode" }, nil)
	good := `"do_remote_prefill":true,"remote_engine_id":"7","remote_host":"h","remote_port":5600`
	for _, tc := range []struct{ name, params, want string }{
		{"not an object", `[1,2]`, "must be an object"},
		{"no engine", `{"do_remote_prefill":true,"remote_block_ids":[1,2],"remote_host":"h","remote_port":1}`, "remote_engine_id"},
		{"no host", `{"do_remote_prefill":true,"remote_engine_id":"7","remote_block_ids":[1,2],"remote_port":1}`, "remote_host"},
		{"bad port", `{` + strings.Replace(good, "5600", "0", 1) + `,"remote_block_ids":[1,2]}`, "remote_port"},
		{"block ids not ids", `{` + good + `,"remote_block_ids":["a"]}`, "remote_block_ids"},
		{"too few blocks", `{` + good + `,"remote_block_ids":[1]}`, "1 remote_block_ids for a prompt of 2 blocks"},
		{"both directions", `{"do_remote_decode":true,"do_remote_prefill":true}`, "both set"},
		{"prefill hop to a decode engine", `{"do_remote_decode":true}`, "not a vLLM-style prefill engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := dec.post("/v1/completions", prompt20(`,"kv_transfer_params":`+tc.params), nil)
			if status != 400 || !strings.Contains(body, "invalid kv_transfer_params") || !strings.Contains(body, tc.want) {
				t.Fatalf("status %d body %s", status, body)
			}
		})
	}
	status, body := dec.post("/v1/completions", prompt20(`,"bootstrap_host":"h","bootstrap_port":1,"bootstrap_room":"x"`), nil)
	if status != 400 || !strings.Contains(body, "bootstrap_room") {
		t.Fatalf("bad room: status %d body %s", status, body)
	}
}

// TestDisaggSGLangHandoff: a decode hop waits in the prefill engine's
// bootstrap server for its room and is served once the prefill hop,
// sent at the same time, is done; a room whose prefill never comes fails
// the decode hop with 503; a prefill hop naming another bootstrap port is
// refused.
func TestDisaggSGLangHandoff(t *testing.T) {
	addr, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	checkLeaks(t)
	pre := startEngine(t, func(c *Config) { c.Role, c.BootstrapPort = "prefill", port }, nil)
	dec := startEngine(t, func(c *Config) { c.Role, c.EngineID, c.BootstrapTimeout = "decode", 43, 500*time.Millisecond }, nil)
	if pre.srv.Card().BootstrapPort != uint32(port) {
		t.Fatalf("card bootstrap port %d", pre.srv.Card().BootstrapPort)
	}
	boot := fmt.Sprintf(`,"bootstrap_host":"127.0.0.1","bootstrap_port":%d,"bootstrap_room":%d`, port, uint64(1)<<62+5)
	var wg sync.WaitGroup
	var decStatus int
	var decBody string
	wg.Go(func() { decStatus, decBody = dec.post("/v1/completions", prompt20(boot), nil) })
	status, body := pre.post("/v1/completions", prompt20(boot), nil)
	wg.Wait()
	if status != 200 || !strings.Contains(body, expectedText(1)) || strings.Contains(body, expectedText(2)) {
		t.Fatalf("prefill %d %s", status, body)
	}
	if decStatus != 200 || !strings.Contains(decBody, expectedText(4)) {
		t.Fatalf("decode %d %s", decStatus, decBody)
	}
	lonely := fmt.Sprintf(`,"bootstrap_host":"127.0.0.1","bootstrap_port":%d,"bootstrap_room":9`, port)
	if status, body := dec.post("/v1/completions", prompt20(lonely), nil); status != 503 || !strings.Contains(body, "bootstrap_failed") {
		t.Fatalf("room without prefill: status %d body %s", status, body)
	}
	other := fmt.Sprintf(`,"bootstrap_host":"127.0.0.1","bootstrap_port":%d,"bootstrap_room":9`, port+1)
	if status, body := pre.post("/v1/completions", prompt20(other), nil); status != 400 || !strings.Contains(body, "is not this prefill engine's") {
		t.Fatalf("other bootstrap port: status %d body %s", status, body)
	}
}
