package frontend

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// apiError is the OpenAI error object; Param and Code are null when empty.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// errorEnvelope is the OpenAI error body {"error": {...}}.
type errorEnvelope struct {
	Error apiError `json:"error"`
}

// optional returns nil for "" so the field encodes as null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// errorJSON encodes err's OpenAI body for its error class.
func errorJSON(err error, c errorClass) []byte {
	b, _ := json.Marshal(errorEnvelope{Error: apiError{
		Message: err.Error(), Type: c.typ, Param: optional(paramOf(err)), Code: optional(c.code),
	}})
	return b
}

// writeJSON writes a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// maxUpstreamErrorBytes caps how much of an engine's error body is read and
// how much of a non-JSON one is quoted back: error bodies are short, and a
// misbehaving engine must not make the node buffer an unbounded one.
const maxUpstreamErrorBytes = 64 << 10

// normaliseUpstreamError rewrites an engine's error body into the OpenAI
// shape. It understands the OpenAI shape itself, vLLM's flat
// {"object":"error","message",...} form, FastAPI's {"detail": ...} and
// plain text; numeric codes become strings.
func normaliseUpstreamError(status int, body []byte) []byte {
	e := apiError{Type: upstreamErrorType(status)}
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
	out, _ := json.Marshal(errorEnvelope{Error: e})
	return out
}

// readUpstreamFields copies the known error fields from an engine's body.
func readUpstreamFields(e *apiError, f map[string]json.RawMessage) {
	if m := jsonText(f["message"]); m != "" {
		e.Message = m
	} else if d := jsonText(f["detail"]); d != "" {
		e.Message = d
	}
	if t := jsonText(f["type"]); t != "" {
		e.Type = t
	}
	e.Param = optional(jsonText(f["param"]))
	e.Code = optional(jsonText(f["code"]))
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

// streamErrorEvent is the SSE event sent when a stream fails after it
// began: the status line is gone, so the error travels in the stream.
func streamErrorEvent(err error, c errorClass) []byte {
	body := errorJSON(err, c)
	ev := make([]byte, 0, len(body)+8)
	return append(append(append(ev, "data: "...), body...), "\n\n"...)
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
