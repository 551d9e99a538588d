package oaiedge

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// APIError is the OpenAI error object; Param and Code are null when nil.
type APIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ErrorBody is the OpenAI error body {"error": {...}}.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// Optional returns nil for "", so that the field encodes as null.
func Optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ErrorJSON encodes err's OpenAI error body in class c, naming the
// parameter a refusal names.
func ErrorJSON(err error, c Class) []byte {
	b, _ := json.Marshal(ErrorBody{Error: APIError{
		Message: ClientMessage(err), Type: c.Type, Param: Optional(ParamOf(err)), Code: Optional(c.Code),
	}})
	return b
}

// StreamErrorEvent is the SSE event that ends a stream failing after it
// began: the status line is gone, so the error travels in the stream.
func StreamErrorEvent(err error, c Class) []byte {
	body := ErrorJSON(err, c)
	ev := make([]byte, 0, len(body)+8)
	return append(append(append(ev, "data: "...), body...), "\n\n"...)
}

// WriteJSON answers a JSON body with status.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteOK answers v as a JSON body with 200.
func WriteOK(w http.ResponseWriter, v any) {
	body, _ := json.Marshal(v)
	WriteJSON(w, http.StatusOK, body)
}

// IsEventStream reports an answer of Content-Type text/event-stream.
func IsEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// ClientMessage is err's message for a client: a refusal's own message,
// else err's text without the package prefixes of Go error chains
// ("dispatch: model not found: ..." reads "model not found: ..."), which
// name the code that failed rather than the fault and mean nothing to a
// client. A prefix is a segment before ": " that is one lowercase word,
// as package names are.
func ClientMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	parts := strings.Split(err.Error(), ": ")
	kept := parts[:0]
	for i, p := range parts {
		if i < len(parts)-1 && isPackageName(p) {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ": ")
}

// isPackageName reports a Go package name: a lowercase letter, then
// lowercase letters and digits.
func isPackageName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
