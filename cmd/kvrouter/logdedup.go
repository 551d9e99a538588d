package main

import (
	"context"
	"log/slog"
	"maps"
)

// dedupHandler drops an attribute that repeats, with the same value, one
// its logger already carries. Layers each name their component (the node
// adds dc and node, then the raft member it runs adds node again, the
// event plane dc again), and a record should read "dc=dc1 node=n3", not
// "dc=dc1 node=n3 node=n3". Groups start afresh, since their keys are
// qualified by the group.
type dedupHandler struct {
	h    slog.Handler
	seen map[string]slog.Value
}

func newDedupHandler(h slog.Handler) slog.Handler { return &dedupHandler{h: h} }

func (d *dedupHandler) Enabled(ctx context.Context, l slog.Level) bool { return d.h.Enabled(ctx, l) }

func (d *dedupHandler) Handle(ctx context.Context, r slog.Record) error {
	if len(d.seen) == 0 {
		return d.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if !d.repeats(a) {
			out.AddAttrs(a)
		}
		return true
	})
	return d.h.Handle(ctx, out)
}

func (d *dedupHandler) WithAttrs(as []slog.Attr) slog.Handler {
	seen := make(map[string]slog.Value, len(d.seen)+len(as))
	maps.Copy(seen, d.seen)
	kept := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if d.repeats(a) {
			continue
		}
		kept = append(kept, a)
		seen[a.Key] = a.Value
	}
	return &dedupHandler{h: d.h.WithAttrs(kept), seen: seen}
}

func (d *dedupHandler) WithGroup(name string) slog.Handler {
	return &dedupHandler{h: d.h.WithGroup(name)}
}

// repeats reports whether a is already carried with the same value.
func (d *dedupHandler) repeats(a slog.Attr) bool {
	v, ok := d.seen[a.Key]
	return ok && v.Equal(a.Value)
}
