package server

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
)

// The pass-through endpoints answer as vLLM does, minimally: enough for a
// router's tests to see a request arrive and an answer of the right shape
// come back. They do not enter the simulated engine: no KV cache, no
// batching, no timing.

// passRequest is the fields the pass-through endpoints read.
type passRequest struct {
	Model        string          `json:"model"`
	Input        json.RawMessage `json:"input"`
	Prompt       json.RawMessage `json:"prompt"`
	Messages     []chatMessage   `json:"messages"`
	Instructions string          `json:"instructions"`
	Tokens       tokenList       `json:"tokens"`
	Stream       bool            `json:"stream"`
}

// readPass decodes a pass-through body and checks its model, answering
// the refusal itself; ok is false after a refusal.
func (s *Server) readPass(w http.ResponseWriter, r *http.Request) (passRequest, bool) {
	var req passRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err == nil {
		err = decodeJSON(body, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
		return req, false
	}
	if req.Model != "" && req.Model != s.cfg.Engine.Model {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("model %q is not served here (serving %q)", req.Model, s.cfg.Engine.Model))
		return req, false
	}
	return req, true
}

// handleEmbeddings answers POST /v1/embeddings with one vector per
// request, derived from the input's pseudo tokens.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readPass(w, r)
	if !ok {
		return
	}
	tokens, err := promptTokens(req.Input)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", strings.Replace(err.Error(), "prompt", "input", 1))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "model": s.cfg.Engine.Model,
		"data":  []map[string]any{{"object": "embedding", "index": 0, "embedding": embedding(tokens)}},
		"usage": map[string]any{"prompt_tokens": len(tokens), "total_tokens": len(tokens)},
	})
}

// embedding is a deterministic unit vector of 8 dimensions.
func embedding(tokens []uint32) []float64 {
	v := make([]float64, 8)
	for i, t := range tokens {
		v[i%8] += float64(t%1000) / 1000
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	if norm > 0 {
		for i := range v {
			v[i] /= math.Sqrt(norm)
		}
	}
	return v
}

// handleResponses answers POST /v1/responses with a completed response
// of a fixed text; streaming is not simulated.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readPass(w, r)
	if !ok {
		return
	}
	if req.Stream {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "the mocker does not stream responses")
		return
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "input is required")
		return
	}
	in := len(TextTokens(req.Instructions + string(req.Input)))
	id := "resp_" + s.nextID(true)
	text := "mock response"
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "object": "response", "created_at": s.cfg.Clock().Unix(), "model": s.cfg.Engine.Model, "status": "completed",
		"output": []map[string]any{{"type": "message", "id": "msg_" + id, "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": text, "annotations": []any{}}}}},
		"usage": map[string]any{"input_tokens": in, "output_tokens": len(TextTokens(text)), "total_tokens": in + len(TextTokens(text))},
	})
}

// handleTokenize answers POST /tokenize with the pseudo tokens of a
// prompt or of chat messages.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readPass(w, r)
	if !ok {
		return
	}
	var tokens []uint32
	var err error
	if req.Messages != nil {
		var text string
		if text, err = chatText(req.Messages); err == nil {
			tokens = TextTokens(text)
		}
	} else {
		tokens, err = promptTokens(req.Prompt)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": len(tokens), "max_model_len": s.cfg.MaxOutputTokens,
		"tokens": tokens, "token_strs": nil})
}

// handleDetokenize answers POST /detokenize with the text of pseudo
// tokens (TextTokens' inverse).
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readPass(w, r)
	if !ok {
		return
	}
	if req.Tokens == nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "tokens is required")
		return
	}
	b := make([]byte, 0, 4*len(req.Tokens))
	for _, t := range req.Tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": strings.TrimRight(string(b), "\x00")})
}

// handleModel answers GET /v1/models/{id} for the served model.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("id") != s.cfg.Engine.Model {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "no such model")
		return
	}
	writeJSON(w, http.StatusOK, s.model())
}
