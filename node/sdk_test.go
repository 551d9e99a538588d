//go:build sdk

// The official OpenAI SDK's end-to-end test runs under `make test-sdk`
// (the sdk build tag), not `make test`: the SDK is the largest compile in
// the tree, about a minute of a cold `make test` on 2 cores
// (docs/testing.md). TestOpenAIWireEndToEnd checks the same requests
// and answers in `make test` with the wire client of oaiedgetest.

package node_test

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// client is an official OpenAI SDK client of the fleet's node.
func (f *fleet) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(f.base+"/v1"), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

func TestOpenAIClientEndToEnd(t *testing.T) {
	f := startFleet(t, 2, nil)
	c := f.client()
	ctx := t.Context()
	chat, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(4),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	if err != nil || len(chat.Choices) != 1 || chat.Choices[0].Message.Content == "" {
		t.Fatalf("chat: %v %+v", err, chat)
	}
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(5),
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var text strings.Builder
	var usage int64
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
		if ch.Usage.CompletionTokens > 0 {
			usage = ch.Usage.CompletionTokens
		}
	}
	if err := stream.Err(); err != nil || text.Len() == 0 || usage != 5 {
		t.Fatalf("chat stream: %v %q usage %d", err, text.String(), usage)
	}
	comp, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: model, MaxTokens: openai.Int(3),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon a time")}})
	if err != nil || len(comp.Choices) != 1 || comp.Usage.CompletionTokens != 3 {
		t.Fatalf("completion: %v %+v", err, comp)
	}
	cs := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: model, MaxTokens: openai.Int(3),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("streamed")}})
	chunks := 0
	for cs.Next() {
		chunks++
	}
	if err := cs.Err(); err != nil || chunks < 3 {
		t.Fatalf("completion stream: %v, %d chunks", err, chunks)
	}
	models, err := c.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != model {
		t.Fatalf("models: %v %+v", err, models)
	}
}
