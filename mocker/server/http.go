package server

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvrouter/kvrouter/mocker"
)

// Request headers the mocker reads.
const (
	// HeaderDPRank pins a request to one data-parallel rank, as routers do
	// after choosing a worker.
	HeaderDPRank = "X-Dp-Rank"
)

// Handler is the OpenAI-compatible HTTP API: POST /v1/chat/completions and
// /v1/completions (streaming or not), GET /v1/models and GET /health, the
// /v1 endpoints behind Config.APIKey when it is set; and, minimally, the
// pass-through endpoints (passthrough.go): POST /v1/embeddings,
// /v1/responses, /tokenize, /detokenize and GET /v1/models/{id}.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		s.handleGenerate(w, r, parseChat)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		s.handleGenerate(w, r, parseCompletion)
	})
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /v1/models/{id}", s.handleModel)
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("POST /v1/responses", s.handleResponses)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.HandleFunc("POST /detokenize", s.handleDetokenize)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "no route for "+r.Method+" "+r.URL.Path)
	})
	if s.cfg.APIKey == "" {
		return mux
	}
	want := []byte("Bearer " + s.cfg.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if strings.HasPrefix(r.URL.Path, "/v1/") && subtle.ConstantTimeCompare(got, want) != 1 {
			writeError(w, http.StatusUnauthorized, "authentication_error", "invalid_api_key", "missing or wrong API key")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type parser func(body []byte, lim limits) (*generation, error)

// handleGenerate parses a request, submits it to a rank and answers with a
// stream or a full object once it completes.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request, parse parser) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large", err.Error())
		return
	} else if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
		return
	}
	g, err := parse(body, limits{def: s.cfg.DefaultMaxTokens, max: s.cfg.MaxOutputTokens})
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
		return
	}
	if g.model != "" && g.model != s.cfg.Engine.Model {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("model %q is not served here (serving %q)", g.model, s.cfg.Engine.Model))
		return
	}
	rk, err := s.pickRank(r.Header)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_dp_rank", err.Error())
		return
	}
	out := &output{srv: s, gen: g, created: s.cfg.Clock().Unix()}
	req := mocker.Request{Tokens: g.tokens, HashSeed: g.seed}
	end, ok := s.hop(w, r, body, out, &req)
	if !ok {
		return
	}
	p := newPending(s.nextID(g.chat), g.maxTokens)
	p.lora, p.salt, out.id = g.lora, g.salt, p.id
	req.ID, req.MaxTokens = p.id, g.maxTokens
	defer func() { end(p.read().succeeded()) }()
	if err := rk.submit(p, req); err != nil {
		writeSubmitError(w, err)
		return
	}
	// A client that goes away (or a request context that ends) cancels
	// the request in the engine, as real engines abort it: it stops
	// generating and frees its KV blocks. After a completion it is a no-op.
	defer rk.cancel(p)
	if g.stream {
		out.stream(w, r, p)
		return
	}
	out.respond(w, r, p)
}

// hop applies a request's hand-off (handoff.go) to its engine request and
// its answer, and returns what records the hop's end (an SGLang prefill
// engine's room). It answers the client itself, and reports false, when
// the hand-off is refused or its cache will not come.
func (s *Server) hop(w http.ResponseWriter, r *http.Request, body []byte, out *output, req *mocker.Request) (func(bool), bool) {
	g := out.gen
	h, err := s.parseHandoff(body, len(g.tokens))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_handoff", err.Error())
		return nil, false
	}
	end := func(bool) {}
	switch h.kind {
	case handoffVLLMPrefill:
		out.transfer = s.transferParams(len(g.tokens))
	case handoffSGLangPrefill:
		// An SGLang prefill engine computes the prompt and one token,
		// whatever output length the request names.
		g.maxTokens = 1
		s.rooms.get(h.room)
		end = func(ok bool) { s.rooms.end(h.room, ok) }
	case handoffSGLangDecode:
		if err := s.awaitRoom(r.Context(), h); err != nil {
			writeError(w, http.StatusServiceUnavailable, "server_error", "bootstrap_failed", err.Error())
			return nil, false
		}
		req.RemotePrefill = true
	case handoffVLLMDecode:
		req.RemotePrefill = true
	}
	return end, true
}

// writeSubmitError maps engine refusals to HTTP statuses.
func writeSubmitError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, mocker.ErrTooLong):
		writeError(w, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", err.Error())
	case errors.Is(err, mocker.ErrBadRequest):
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
	case errors.Is(err, ErrStopped):
		writeError(w, http.StatusServiceUnavailable, "server_error", "engine_stopped", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "server_error", "internal_error", err.Error())
	}
}

// pickRank honours the rank header, else takes the rank with the fewest
// requests in flight (the lowest on ties), as a DP-aware engine frontend
// balances unpinned requests.
func (s *Server) pickRank(h http.Header) (*rank, error) {
	if v := h.Get(HeaderDPRank); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n >= uint64(len(s.ranks)) {
			return nil, fmt.Errorf("%s %q is not a rank in 0..%d", HeaderDPRank, v, len(s.ranks)-1)
		}
		return s.ranks[n], nil
	}
	best := s.ranks[0]
	for _, r := range s.ranks[1:] {
		if r.inflight.Load() < best.inflight.Load() {
			best = r
		}
	}
	return best, nil
}

// nextID names a request uniquely within this incarnation.
func (s *Server) nextID(chat bool) string {
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	return prefix + strconv.FormatUint(s.incarnation, 36) + "-" + strconv.FormatUint(s.reqSeq.Add(1), 10)
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{s.model()}})
}

// model is the served model's object in /v1/models.
func (s *Server) model() map[string]any {
	return map[string]any{"id": s.cfg.Engine.Model, "object": "model", "created": 0, "owned_by": "kvrouter-mocker"}
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"status": "ok", "engine_id": strconv.FormatUint(s.cfg.EngineID, 10), "dp_size": len(s.ranks),
	})
}

// apiError is the OpenAI error body.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, apiError{Error: apiErrorBody{Message: msg, Type: typ, Code: code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
