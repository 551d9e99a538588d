package tokenize

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type conversation struct {
	Name     string          `json:"name"`
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
}

type expectedChat struct {
	Name                string   `json:"name"`
	AddGenerationPrompt bool     `json:"add_generation_prompt"`
	Text                *string  `json:"text"`
	IDs                 []uint32 `json:"ids"`
	Error               string   `json:"error"`
}

// TestChatMatchesReference renders every conversation of
// testdata/conversations.json and compares text and ids with the
// reference's; a conversation the reference's template refused must be
// refused here too.
func TestChatMatchesReference(t *testing.T) {
	b, err := os.ReadFile("testdata/conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	var convs []conversation
	if err := json.Unmarshal(b, &convs); err != nil {
		t.Fatal(err)
	}
	byName := map[string]conversation{}
	for _, c := range convs {
		byName[c.Name] = c
	}
	for _, fam := range families {
		tok := loadFamily(t, fam)
		var want []expectedChat
		if err := json.Unmarshal(readGz(t, filepath.Join("testdata", fam, "expected_chat.json.gz")), &want); err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			if _, ok := tok.chat.pick(false); ok {
				t.Errorf("%s: a template where the reference had none", fam)
			}
			continue
		}
		for _, w := range want {
			name := fam + "/" + w.Name
			if w.AddGenerationPrompt {
				name += "/generation-prompt"
			}
			t.Run(name, func(t *testing.T) {
				c := byName[w.Name]
				req := ChatRequest{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: w.AddGenerationPrompt}
				got, err := tok.ApplyChatTemplate(req)
				if w.Text == nil && strings.Contains(strings.ToLower(w.Error), "null") {
					// A null content (an assistant turn that only calls
					// tools) fails in the reference's template engine, and
					// the Python engines differ again. Here it renders as
					// an empty string does, which is what servers pass the
					// template after normalising the message.
					empty := ChatRequest{Messages: json.RawMessage(strings.ReplaceAll(string(c.Messages), `"content": null`, `"content": ""`)),
						Tools: c.Tools, AddGenerationPrompt: w.AddGenerationPrompt}
					if want, err2 := tok.ApplyChatTemplate(empty); err != nil || err2 != nil || got != want {
						t.Fatalf("null content: got %q, %v; with empty content %q, %v", got, err, want, err2)
					}
					return
				}
				if w.Text == nil {
					if !errors.Is(err, ErrTemplate) {
						t.Fatalf("reference failed with %q; got %q, %v", w.Error, got, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got != *w.Text {
					t.Fatalf("rendering differs\ngot  %q\nwant %q", got, *w.Text)
				}
				ids, err := tok.EncodeChat(req, nil)
				if err != nil || !equalIDs(ids, w.IDs) {
					t.Fatalf("ids differ at %d: %v", firstDiff(ids, w.IDs), err)
				}
			})
		}
	}
}
