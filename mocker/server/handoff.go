package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/kvrouter/kvrouter/routing"
)

// Disaggregated serving. An engine's Config.Role says which hop it
// serves; the request's hand-off fields say what the hop is, in one of the
// two wires engines speak:
//
//   - vLLM's (kv_transfer_params, NIXL connector style). A prefill engine
//     given {"do_remote_decode": true} serves the request as usual (the
//     router asks for one token) and answers with kv_transfer_params
//     {"do_remote_prefill": true, "remote_engine_id", "remote_block_ids"
//     (one id per prompt block), "remote_host", "remote_port", "tp_size"}.
//     A decode engine given those back receives the prompt's cache
//     (mocker.Request.RemotePrefill: the transfer time, then only the
//     prompt's tail) and decodes. Malformed parameters, a block count
//     that does not match the prompt, or a hop sent to an engine of the
//     other role are refused with 400, as a decode engine refuses a
//     hand-off it cannot use.
//   - SGLang's (bootstrap_host, bootstrap_port, bootstrap_room, on both
//     hops at once). A prefill engine with a BootstrapPort serves the room
//     as a one-token request and records its end in its bootstrap server
//     (bootstrap.go); a decode engine first asks that server for the
//     room, which answers once the prefill is done (or refuses when it
//     failed or did not come within BootstrapTimeout: the request is then
//     refused with 503), and then receives the cache as above.
//
// A request without hand-off fields is served whole, whatever the role,
// as a vLLM or SGLang engine with a KV connector serves one; kv_transfer_
// params sent to an aggregated engine are ignored, as vLLM ignores them
// without a connector.

// handoffKind is the hop a request asks for.
type handoffKind uint8

const (
	handoffNone handoffKind = iota
	handoffVLLMPrefill
	handoffVLLMDecode
	handoffSGLangPrefill
	handoffSGLangDecode
)

// handoff is a request's hop, parsed and checked against the engine.
type handoff struct {
	kind handoffKind
	// host, port and room name an SGLang bootstrap room.
	host string
	port int
	room uint64
}

// wireHandoff are a request body's hand-off fields, undecoded.
type wireHandoff struct {
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
	BootstrapHost    json.RawMessage `json:"bootstrap_host"`
	BootstrapPort    json.RawMessage `json:"bootstrap_port"`
	BootstrapRoom    json.RawMessage `json:"bootstrap_room"`
}

// vllmParams are the kv_transfer_params fields a vLLM hop reads.
type vllmParams struct {
	DoRemoteDecode  bool            `json:"do_remote_decode"`
	DoRemotePrefill bool            `json:"do_remote_prefill"`
	RemoteEngineID  json.RawMessage `json:"remote_engine_id"`
	RemoteBlockIDs  json.RawMessage `json:"remote_block_ids"`
	RemoteHost      json.RawMessage `json:"remote_host"`
	RemotePort      json.RawMessage `json:"remote_port"`
}

// parseHandoff reads the hop body asks of this engine, for a prompt of
// tokens tokens.
func (s *Server) parseHandoff(body []byte, tokens int) (handoff, error) {
	var w wireHandoff
	if err := json.Unmarshal(body, &w); err != nil {
		return handoff{}, fmt.Errorf("%w: invalid JSON body: %v", ErrRequest, err)
	}
	if !isNull(w.BootstrapRoom) {
		return s.sglangHop(&w)
	}
	if isNull(w.KVTransferParams) || s.cfg.role() == routing.RoleAggregated {
		return handoff{}, nil
	}
	return s.vllmHop(w.KVTransferParams, tokens)
}

// isNull reports an absent or null field.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// sglangHop checks an SGLang hop's bootstrap fields against the role.
func (s *Server) sglangHop(w *wireHandoff) (handoff, error) {
	var h handoff
	if err := json.Unmarshal(w.BootstrapHost, &h.host); err != nil || h.host == "" {
		return handoff{}, fmt.Errorf("%w: bootstrap_host must be a host name", ErrRequest)
	}
	port, err := strconv.ParseUint(string(bytes.TrimSpace(w.BootstrapPort)), 10, 16)
	if err != nil || port == 0 {
		return handoff{}, fmt.Errorf("%w: bootstrap_port must be a port in 1..65535", ErrRequest)
	}
	h.port = int(port)
	if h.room, err = strconv.ParseUint(string(bytes.TrimSpace(w.BootstrapRoom)), 10, 63); err != nil {
		return handoff{}, fmt.Errorf("%w: bootstrap_room must be an integer in 0..2^63-1", ErrRequest)
	}
	switch r := s.cfg.role(); {
	case r == routing.RoleDecode:
		h.kind = handoffSGLangDecode
	case r == routing.RolePrefill && s.cfg.BootstrapPort == h.port:
		h.kind = handoffSGLangPrefill
	case r == routing.RolePrefill:
		return handoff{}, fmt.Errorf("%w: bootstrap_port %d is not this prefill engine's (%d)", ErrRequest, h.port, s.cfg.BootstrapPort)
	default:
		return handoff{}, fmt.Errorf("%w: bootstrap fields sent to an engine of role %s", ErrRequest, r)
	}
	return h, nil
}

// vllmHop checks a vLLM hop's kv_transfer_params against the role.
func (s *Server) vllmHop(raw json.RawMessage, tokens int) (handoff, error) {
	var p vllmParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return handoff{}, fmt.Errorf("%w: invalid kv_transfer_params: must be an object: %v", ErrRequest, err)
	}
	role := s.cfg.role()
	switch {
	case p.DoRemoteDecode && p.DoRemotePrefill:
		return handoff{}, fmt.Errorf("%w: invalid kv_transfer_params: do_remote_decode and do_remote_prefill both set", ErrRequest)
	case p.DoRemoteDecode && (role != routing.RolePrefill || s.cfg.BootstrapPort != 0):
		return handoff{}, fmt.Errorf("%w: invalid kv_transfer_params: do_remote_decode sent to an engine that is not a vLLM-style prefill engine", ErrRequest)
	case p.DoRemoteDecode:
		return handoff{kind: handoffVLLMPrefill}, nil
	case p.DoRemotePrefill && role != routing.RoleDecode:
		return handoff{}, fmt.Errorf("%w: invalid kv_transfer_params: do_remote_prefill sent to an engine of role %s", ErrRequest, role)
	case p.DoRemotePrefill:
		return handoff{kind: handoffVLLMDecode}, s.checkRemote(&p, tokens)
	}
	return handoff{}, nil
}

// checkRemote checks the prefill engine's side of a decode hop: who holds
// the cache, where, and one block id per prompt block.
func (s *Server) checkRemote(p *vllmParams, tokens int) error {
	var engine, host string
	var port uint64
	var ids []uint64
	switch {
	case json.Unmarshal(p.RemoteEngineID, &engine) != nil || engine == "":
		return fmt.Errorf("%w: invalid kv_transfer_params: remote_engine_id must be a non-empty string", ErrRequest)
	case json.Unmarshal(p.RemoteHost, &host) != nil || host == "":
		return fmt.Errorf("%w: invalid kv_transfer_params: remote_host must be a non-empty string", ErrRequest)
	case json.Unmarshal(p.RemotePort, &port) != nil || port == 0 || port > 65535:
		return fmt.Errorf("%w: invalid kv_transfer_params: remote_port must be a port in 1..65535", ErrRequest)
	case json.Unmarshal(p.RemoteBlockIDs, &ids) != nil:
		return fmt.Errorf("%w: invalid kv_transfer_params: remote_block_ids must be an array of block ids", ErrRequest)
	}
	if want := s.promptBlocks(tokens); len(ids) != want {
		return fmt.Errorf("%w: invalid kv_transfer_params: %d remote_block_ids for a prompt of %d blocks", ErrRequest, len(ids), want)
	}
	return nil
}

// promptBlocks is the blocks a prompt of tokens tokens fills, its partial
// tail included: what a prefill engine holds and sends.
func (s *Server) promptBlocks(tokens int) int {
	bs := s.cfg.Engine.BlockSize
	return (tokens + bs - 1) / bs
}

// transferParams is a vLLM prefill engine's answer for a prompt of tokens
// tokens: where its cache is, for the decode engine to fetch.
func (s *Server) transferParams(tokens int) json.RawMessage {
	n := s.promptBlocks(tokens)
	first := s.blockSeq.Add(uint64(n)) - uint64(n)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = first + uint64(i)
	}
	host, port := "127.0.0.1", 0
	if u, err := url.Parse(s.cfg.EndpointURL); err == nil {
		host = u.Hostname()
		port, _ = strconv.Atoi(u.Port())
	}
	out, _ := json.Marshal(map[string]any{
		"do_remote_prefill": true, "do_remote_decode": false,
		"remote_engine_id": strconv.FormatUint(s.cfg.EngineID, 10), "remote_block_ids": ids,
		"remote_host": host, "remote_port": port, "tp_size": 1,
	})
	return out
}
