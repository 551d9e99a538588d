package tokenize

import (
	"slices"
	"testing"
)

func TestEncodeRequestFollowsTheEnginesRules(t *testing.T) {
	tok, err := Load("testdata/qwen3")
	if err != nil {
		t.Fatal(err)
	}
	msgs := `[{"role":"user","content":"Hi"}]`
	rendered, err := tok.ApplyChatTemplate(ChatRequest{Messages: []byte(msgs), AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	noGen, _ := tok.ApplyChatTemplate(ChatRequest{Messages: []byte(msgs)})
	tests := []struct {
		name, body string
		chat       bool
		prompt     string
		want       []uint32
	}{
		{"chat adds the generation prompt by default", `{"messages":` + msgs + `}`, true, "", tok.Encode(rendered, false, nil)},
		{"chat without the generation prompt", `{"messages":` + msgs + `,"add_generation_prompt":false}`, true, "", tok.Encode(noGen, false, nil)},
		{"completion", `{"prompt":"Hello"}`, false, "Hello", tok.Encode("Hello", true, nil)},
		{"completion without special tokens", `{"prompt":"Hello","add_special_tokens":false}`, false, "Hello", tok.Encode("Hello", false, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tok.EncodeRequest([]byte(tc.body), tc.chat, tc.prompt, nil)
			if err != nil || !slices.Equal(got, tc.want) || len(got) == 0 {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := tok.EncodeRequest([]byte(`{"messages":"nope"}`), true, "", nil); err == nil {
		t.Fatal("messages that are not an array must be refused")
	}
}
