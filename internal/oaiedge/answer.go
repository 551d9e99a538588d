package oaiedge

import (
	"encoding/json"
	"net/http"
	"strconv"
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
		Message: err.Error(), Type: c.Type, Param: Optional(ParamOf(err)), Code: Optional(c.Code),
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
