package consensus

import (
	"context"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newHclogAdapter gives raft an hclog logger that writes its warnings and
// errors, one slog record per line, to log. Raft's info chatter (every
// election step) is left out; the node logs leadership changes itself.
func newHclogAdapter(log *slog.Logger, node string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:            "raft",
		Level:           hclog.Warn,
		Output:          &slogWriter{log: log.With("node", node)},
		DisableTime:     true,
		IncludeLocation: false,
	})
}

// slogWriter turns hclog's text lines into slog records.
type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	switch {
	case strings.Contains(line, "transport shutdown"):
		// Peers' connections ending as a node shuts down: expected.
		level = slog.LevelDebug
	case strings.Contains(line, "connection refused"), strings.Contains(line, "error=EOF"):
		// A peer that is down: raft retries with backoff, and the
		// membership and leadership logs say what matters.
		level = slog.LevelWarn
	case strings.Contains(line, "[ERROR]"):
		level = slog.LevelError
	}
	w.log.Log(context.Background(), level, line)
	return len(p), nil
}
