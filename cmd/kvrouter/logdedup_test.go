package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestDedupHandlerDropsRepeatedAttributes(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
		want string
	}{
		{"same value through With", func(l *slog.Logger) { l.With("dc", "dc1", "node", "n3").With("node", "n3").Info("m") }, "msg=m dc=dc1 node=n3"},
		{"same value in the record", func(l *slog.Logger) { l.With("dc", "dc1").Info("m", "dc", "dc1", "worker", "w") }, "msg=m dc=dc1 worker=w"},
		{"a different value is kept", func(l *slog.Logger) { l.With("dc", "dc1").Info("m", "dc", "dc2") }, "msg=m dc=dc1 dc=dc2"},
		{"groups start afresh", func(l *slog.Logger) { l.With("node", "n1").WithGroup("g").Info("m", "node", "n1") }, "msg=m node=n1 g.node=n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			h := slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
					return slog.Attr{}
				}
				return a
			}})
			tc.log(slog.New(newDedupHandler(h)))
			if got := strings.TrimSpace(b.String()); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
