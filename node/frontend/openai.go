package frontend

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// maxUpstreamErrorBytes caps how much of an engine's error body is read and
// how much of a non-JSON one is quoted back: error bodies are short, and a
// misbehaving engine must not make the node buffer an unbounded one.
const maxUpstreamErrorBytes = 64 << 10

// normaliseUpstreamError rewrites an engine's error body into the OpenAI
// shape. It understands the OpenAI shape itself, vLLM's flat
// {"object":"error","message",...} form, FastAPI's {"detail": ...} and
// plain text; numeric codes become strings.
func normaliseUpstreamError(status int, body []byte) []byte {
	e := oaiedge.APIError{Type: upstreamErrorType(status)}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil {
		fields := top
		if inner, ok := top["error"]; ok {
			var m map[string]json.RawMessage
			if json.Unmarshal(inner, &m) == nil {
				fields = m
			} else {
				fields = map[string]json.RawMessage{"message": inner}
			}
		}
		readUpstreamFields(&e, fields)
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
	}
	if e.Message == "" {
		e.Message = "engine returned " + strconv.Itoa(status) + " " + http.StatusText(status)
	}
	out, _ := json.Marshal(oaiedge.ErrorBody{Error: e})
	return out
}

// readUpstreamFields copies the known error fields from an engine's body.
func readUpstreamFields(e *oaiedge.APIError, f map[string]json.RawMessage) {
	if m := jsonText(f["message"]); m != "" {
		e.Message = m
	} else if d := jsonText(f["detail"]); d != "" {
		e.Message = d
	}
	if t := jsonText(f["type"]); t != "" {
		e.Type = t
	}
	e.Param = oaiedge.Optional(jsonText(f["param"]))
	e.Code = oaiedge.Optional(jsonText(f["code"]))
}

// jsonText renders a JSON value as text: strings unquoted, null and absent
// as "", anything else as its compact JSON.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// upstreamErrorType is the OpenAI error type for an engine status.
func upstreamErrorType(status int) string {
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "server_error"
}

// modelList is the OpenAI /v1/models response.
type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// modelObject is one OpenAI model entry.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
