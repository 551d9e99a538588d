package oaiedge

import (
	"strings"
	"testing"
)

// TestResponsesInputItems checks that a Responses request's input items
// with a role are routed by their text, items without one (tool calls)
// add nothing, and a malformed item names its parameter.
func TestResponsesInputItems(t *testing.T) {
	tests := []struct {
		name, body string
		wantText   []string
		wantErr    string
	}{
		{name: "role items", body: `{"model":"m","input":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","name":"f"}]}`,
			wantText: []string{"system\nbe brief\n", "user\nhi"}},
		{name: "item not an object", body: `{"model":"m","input":[3]}`, wantErr: "input[0]"},
		{name: "role not a string", body: `{"model":"m","input":[{"role":1}]}`, wantErr: "input[0].role"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.body), Responses, Options{MaxPromptTokens: 1 << 16})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.wantText {
				if !strings.Contains(r.Text, w) {
					t.Fatalf("text %q lacks %q", r.Text, w)
				}
			}
		})
	}
}
