package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestMockerVLLMProtocolFlags: bad vLLM-wire options are refused before
// anything binds, naming the option.
func TestMockerVLLMProtocolFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		key  string
	}{
		{"unknown protocol", []string{"--protocol", "trtllm"}, "protocol"},
		{"events endpoint", []string{"--protocol", "vllm", "--kv-events-endpoint", "ipc:///tmp/kv"}, "kv_events_endpoint"},
		{"replay endpoint", []string{"--protocol", "vllm", "--replay-endpoint", "localhost:5558"}, "replay_endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, append([]string{"mocker", "--http-addr", "127.0.0.1:0"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err %v, want one naming %s", err, tc.key)
			}
		})
	}
}

// TestMockerVLLMProtocolRunsWithoutNATS: in the vLLM-wire mode the mocker
// starts and stops cleanly with no NATS server anywhere.
func TestMockerVLLMProtocolRunsWithoutNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"mocker", "--protocol", "vllm", "--http-addr", "127.0.0.1:0",
		"--kv-events-endpoint", "tcp://127.0.0.1:0", "--replay-endpoint", "tcp://127.0.0.1:0", "--nats", "nats://127.0.0.1:1"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("mocker --protocol vllm: %v\n%s", err, out.String())
	}
}
