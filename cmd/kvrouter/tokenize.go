package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kvrouter/kvrouter/tokenize"
)

// maxTokenizeInput bounds what the tokenize command reads from stdin: a
// prompt of a few hundred thousand tokens is about a megabyte, so 64 MiB is
// far beyond any real prompt and still fits in memory.
const maxTokenizeInput = 64 << 20

func newTokenizeCmd() *cobra.Command {
	var dir string
	var chat, special, genPrompt bool
	cmd := &cobra.Command{
		Use:   "tokenize",
		Short: "Print the token ids of a prompt (stdin) as a JSON array",
		Long: `Reads a prompt on stdin and prints its token ids, computed with the model's
Hugging Face tokenizer as the engine computes them. With --chat, stdin is an
OpenAI messages array (or an object with "messages" and "tools"), rendered
with the model's chat template before tokenizing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := tokenize.Load(dir)
			if err != nil {
				return err
			}
			in, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxTokenizeInput+1))
			if err != nil {
				return err
			}
			if len(in) > maxTokenizeInput {
				return fmt.Errorf("tokenize: input exceeds %d bytes", maxTokenizeInput)
			}
			var ids []uint32
			if chat {
				if ids, err = tok.EncodeChat(chatRequest(in, genPrompt), nil); err != nil {
					return err
				}
			} else {
				ids = tok.Encode(string(in), special, nil)
			}
			if ids == nil {
				ids = []uint32{}
			}
			out, err := json.Marshal(ids)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", out)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "model directory holding tokenizer.json (and tokenizer_config.json), or the tokenizer.json file")
	cmd.Flags().BoolVar(&chat, "chat", false, "stdin is an OpenAI messages array, rendered with the chat template")
	cmd.Flags().BoolVar(&genPrompt, "add-generation-prompt", true, "with --chat: end with the opening of an assistant turn")
	cmd.Flags().BoolVar(&special, "add-special-tokens", false, "without --chat: add the model's special tokens (such as a beginning-of-text token)")
	_ = cmd.MarkFlagRequired("tokenizer")
	return cmd
}

// chatRequest reads --chat input: a bare messages array, or an object
// with messages and tools as in a chat completion request.
func chatRequest(in []byte, genPrompt bool) tokenize.ChatRequest {
	req := tokenize.ChatRequest{AddGenerationPrompt: genPrompt}
	var body struct {
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(in, &body); err == nil && body.Messages != nil {
		req.Messages, req.Tools = body.Messages, body.Tools
		return req
	}
	req.Messages = in
	return req
}
