package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// AdminConfig configures the operator API (GET and POST /busy_threshold).
// Who may call it is the edge's admin scope (Config.Edge: operator
// tokens or certificates, else loopback listeners only), as for the
// session routes: unauthenticated threshold changes would let any client
// shed everyone's traffic.
type AdminConfig struct {
	// Thresholds reads and changes the per-model busy thresholds; nil
	// turns the operator API off.
	Thresholds ThresholdStore
}

// ThresholdStore is the per-model busy thresholds as the operator API
// sees them. In a cluster SetThresholds goes through the DC's raft log,
// so every node applies the same value and it survives restarts.
type ThresholdStore interface {
	// Thresholds returns a model's effective thresholds and whether they
	// were set at run time.
	Thresholds(model string) (policy.Thresholds, bool)
	// SetThresholds replaces a model's thresholds; nil resets them to the
	// configuration's.
	SetThresholds(ctx context.Context, model string, th *policy.Thresholds) error
}

// ErrAdminDisabled is the operator API's answer when the node has no
// threshold store (403).
var ErrAdminDisabled = errors.New("frontend: runtime busy thresholds unavailable on this node")

// thresholdsView is the JSON of GET and POST /busy_threshold, with the
// reference's keys; an absent threshold is unset.
type thresholdsView struct {
	Model                   string   `json:"model"`
	ActiveDecodeBlocks      *float64 `json:"active_decode_blocks_threshold"`
	ActivePrefillTokens     *int64   `json:"active_prefill_tokens_threshold"`
	ActivePrefillTokensFrac *float64 `json:"active_prefill_tokens_threshold_frac"`
	// Reset, in a POST, drops the model's runtime thresholds.
	Reset bool `json:"reset,omitempty"`
	// Source, in answers, is "runtime" or "config".
	Source string `json:"source,omitempty"`
}

// authorize checks that the node has a threshold store; the edge's admin
// scope has already checked the caller.
func (s *Server) authorize(*http.Request) error {
	if s.cfg.Admin.Thresholds == nil {
		return ErrAdminDisabled
	}
	return nil
}

// handleGetThresholds answers GET /busy_threshold?model=M.
func (s *Server) handleGetThresholds(w http.ResponseWriter, r *http.Request) {
	if err := s.authorize(r); err != nil {
		s.errs.Write(w, err)
		return
	}
	model := r.URL.Query().Get("model")
	if model == "" {
		s.errs.Write(w, oaiedge.Invalid("model", "the model query parameter is required"))
		return
	}
	s.writeThresholds(w, model)
}

// handleSetThresholds answers POST /busy_threshold.
func (s *Server) handleSetThresholds(w http.ResponseWriter, r *http.Request) {
	if err := s.authorize(r); err != nil {
		s.errs.Write(w, err)
		return
	}
	var v thresholdsView
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		s.errs.Write(w, oaiedge.Invalid("", "busy_threshold body: %v", err))
		return
	}
	if v.Model == "" {
		s.errs.Write(w, oaiedge.Invalid("model", "model is required"))
		return
	}
	var th *policy.Thresholds
	if !v.Reset {
		th = &policy.Thresholds{ActiveDecodeBlocks: v.ActiveDecodeBlocks, ActivePrefillTokens: v.ActivePrefillTokens,
			ActivePrefillTokensFrac: v.ActivePrefillTokensFrac}
		if err := th.Validate(); err != nil {
			s.errs.Write(w, oaiedge.Invalid("", "%v", err))
			return
		}
	}
	if err := s.cfg.Admin.Thresholds.SetThresholds(r.Context(), v.Model, th); err != nil {
		s.errs.Write(w, err)
		return
	}
	s.log.Info("busy thresholds changed", "model", v.Model, "reset", v.Reset)
	s.writeThresholds(w, v.Model)
}

// writeThresholds answers a model's effective thresholds.
func (s *Server) writeThresholds(w http.ResponseWriter, model string) {
	th, runtime := s.cfg.Admin.Thresholds.Thresholds(model)
	v := thresholdsView{Model: model, ActiveDecodeBlocks: th.ActiveDecodeBlocks, ActivePrefillTokens: th.ActivePrefillTokens,
		ActivePrefillTokensFrac: th.ActivePrefillTokensFrac, Source: "config"}
	if runtime {
		v.Source = "runtime"
	}
	oaiedge.WriteOK(w, v)
}
