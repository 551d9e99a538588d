package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// qwen3Dir lays out the test tokenizer as a model directory.
func qwen3Dir(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "tokenize", "testdata", "qwen3")
	f, err := os.Open(filepath.Join(src, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), b.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644)
	return dir
}

func TestTokenizeCommand(t *testing.T) {
	dir := qwen3Dir(t)
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"text", nil, "Hello  world's <|im_start|> 12345 éé\n\n  x",
			"[9707,220,1879,594,220,151644,220,16,17,18,19,20,3958,963,271,220,856]\n"},
		{"chat", []string{"--chat"}, `[{"role":"user","content":"Hi"}]`,
			"[151644,872,198,13048,151645,198,151644,77091,198]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newRootCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetIn(strings.NewReader(tt.stdin))
			cmd.SetArgs(append([]string{"tokenize", "--tokenizer", dir}, tt.args...))
			if err := cmd.ExecuteContext(t.Context()); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("got %s want %s", out.String(), tt.want)
			}
		})
	}
}
