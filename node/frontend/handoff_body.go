package frontend

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The request bodies of the two hops of a disaggregated request. The
// router owns no field of an aggregated request, but it owns the hand-off:
// it sets the fields below on both hops, over anything the client sent in
// them, so that no client can point a decode engine at a cache of its
// choosing. The client's body was validated when it was parsed; it is
// rewritten as a map of raw values, so only the top level is decoded
// again, and only for disaggregated requests.

// vllmPrefillParams are the kv_transfer_params of a vLLM prefill request
// (the NIXL connector's): compute the prompt's cache and keep it for a
// remote decode. vLLM's own proxy examples send exactly these.
var vllmPrefillParams = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,` +
	`"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)

// jsonFalse and jsonOne are the values the prefill request sets.
var (
	jsonFalse = json.RawMessage(`false`)
	jsonOne   = json.RawMessage(`1`)
)

// rewrite decodes the top level of a JSON object body, lets edit change
// it and encodes it again.
func rewrite(body []byte, edit func(map[string]json.RawMessage)) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	edit(m)
	return json.Marshal(m)
}

// vllmPrefillBody is the prefill hop of vLLM's hand-off: the client's
// request with max_tokens 1 (max_completion_tokens too, when given), not
// streamed, without stream options or minimum lengths (which a one-token
// answer cannot meet), and with do_remote_decode kv_transfer_params.
func vllmPrefillBody(body []byte) ([]byte, error) {
	return rewrite(body, func(m map[string]json.RawMessage) {
		m["kv_transfer_params"] = vllmPrefillParams
		m["stream"], m["max_tokens"] = jsonFalse, jsonOne
		if _, ok := m["max_completion_tokens"]; ok {
			m["max_completion_tokens"] = jsonOne
		}
		for _, k := range []string{"stream_options", "min_tokens", "min_completion_tokens"} {
			delete(m, k)
		}
	})
}

// vllmDecodeBody is the decode hop of vLLM's hand-off: the client's
// request, carrying the prefill answer's kv_transfer_params unchanged.
func vllmDecodeBody(body []byte, params json.RawMessage) ([]byte, error) {
	return rewrite(body, func(m map[string]json.RawMessage) { m["kv_transfer_params"] = params })
}

// bootstrap is SGLang's hand-off: the prefill engine's bootstrap server
// and the request's room, the same on both hops.
type bootstrap struct {
	host string
	port uint32
	room uint64
}

// sglangBody is a hop of SGLang's hand-off: the client's request with the
// bootstrap fields; the prefill hop (prefill set) is not streamed, since
// the router only waits for its end.
func sglangBody(body []byte, b bootstrap, prefill bool) ([]byte, error) {
	host, err := json.Marshal(b.host)
	if err != nil {
		return nil, err
	}
	return rewrite(body, func(m map[string]json.RawMessage) {
		m["bootstrap_host"] = host
		m["bootstrap_port"] = json.RawMessage(strconv.FormatUint(uint64(b.port), 10))
		m["bootstrap_room"] = json.RawMessage(strconv.FormatUint(b.room, 10))
		if prefill {
			m["stream"] = jsonFalse
			delete(m, "stream_options")
		}
	})
}

// transferParams reads the kv_transfer_params object of a vLLM prefill
// answer. A prefill engine keeps no cache for a request that ended at its
// one token (an end of sequence: finish_reason "stop"), and answers
// without one; the decode hop then gets null and computes the prompt
// itself, as with vLLM's own proxy. An answer cut by its length without
// one comes from an engine that does not hand off (not a prefill engine of
// a KV connector): an error.
func transferParams(answer []byte) (json.RawMessage, error) {
	var a struct {
		Params  json.RawMessage `json:"kv_transfer_params"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		return nil, fmt.Errorf("prefill answer is not JSON: %w", err)
	}
	if len(a.Params) > 0 && a.Params[0] == '{' {
		return a.Params, nil
	}
	if len(a.Choices) > 0 && a.Choices[0].FinishReason == "stop" {
		return jsonNull, nil
	}
	return nil, fmt.Errorf("prefill answer carries no kv_transfer_params object")
}

// jsonNull is the hand-off of a request the prefill engine ended.
var jsonNull = json.RawMessage(`null`)
