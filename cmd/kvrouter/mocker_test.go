package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/waittest"
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
	out, err := runUntilLogged(t, "mocker serving", "mocker", "--protocol", "vllm", "--http-addr", "127.0.0.1:0",
		"--kv-events-endpoint", "tcp://127.0.0.1:0", "--replay-endpoint", "tcp://127.0.0.1:0", "--nats", "nats://127.0.0.1:1")
	if err != nil || !strings.Contains(out, "mocker serving") {
		t.Fatalf("mocker --protocol vllm: %v\n%s", err, out)
	}
}

// lockedBuffer is a bytes.Buffer that a command's logs and the test read
// from different goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runUntilLogged runs the command of args until its log holds started,
// then stops it, and returns what it wrote and what it returned. It is
// how a test sees a long-running command start and stop cleanly,
// whatever the machine's speed.
func runUntilLogged(t *testing.T, started string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := newRootCmd()
	var out lockedBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	waittest.Until(t, 30*time.Second, "the command to log "+started, func() bool {
		select {
		case err := <-done:
			done <- err // ended early: reported below
			return true
		default:
			return strings.Contains(out.String(), started)
		}
	})
	cancel()
	err := <-done
	return out.String(), err
}
