package producer

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/relay/filter"
)

func TestSessionPoolIdentity(t *testing.T) {
	tests := []struct {
		name string
		pool PoolID
		want error
	}{
		{name: "session summary", pool: SessionPool("dc-a"), want: nil},
		{name: "no model outside the session domain", pool: PoolID{DC: "dc-a", Domain: Domain{BlockSize: 1, HashScheme: HashSchemeXXH3Chain}}, want: ErrInvalidPool},
		{name: "session scheme with another seed", pool: PoolID{DC: "dc-a", Domain: Domain{BlockSize: 1, HashScheme: HashSchemeSessionKey}}, want: ErrInvalidPool},
		{name: "session domain needs a dc", pool: SessionPool(""), want: ErrInvalidPool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.pool.Validate(); !errors.Is(err, tt.want) {
				t.Fatalf("Validate(%v) = %v, want %v", tt.pool, err, tt.want)
			}
		})
	}
}

// TestSessionSummary: the session pool is an ordinary producer fed from a
// batch's Sessions; binds and unbinds publish deltas a subscriber mirrors,
// and a block pool ignores them.
func TestSessionSummary(t *testing.T) {
	sp, err := New(SessionPool("dc-a"), Config{Filter: filter.Config{Capacity: 1024, Seed: 7}}, newRandForTest())
	if err != nil {
		t.Fatal(err)
	}
	blocks := newTestProducer(t, 1024, 16)
	f, _ := sp.Subscribe()
	m := newMirror(t, f)
	a, b := SessionHash("a"), SessionHash("b")
	steps := []Batch{
		{Index: 1, Sessions: []Change{stored(SessionOwner, a, b)}},
		{Index: 2, Changes: []Change{stored(w1, 5)}},
		{Index: 3, Sessions: []Change{removed(SessionOwner, a)}},
	}
	for _, st := range steps {
		if err := blocks.Apply(st); err != nil {
			t.Fatal(err)
		}
		if sb := st.SessionBatch(); len(sb.Changes) > 0 {
			if err := sp.Apply(sb); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.drain(t, f)
	m.assertSame(t, sp)
	if m.seq != 2 || !m.c.Contains(b) || sp.Refs(a) != 0 || sp.Refs(b) != 1 {
		t.Fatalf("mirror seq %d, contains b %v, refs a %d b %d", m.seq, m.c.Contains(b), sp.Refs(a), sp.Refs(b))
	}
	if blocks.Refs(a) != 0 || blocks.Refs(b) != 0 || blocks.Refs(5) != 1 {
		t.Fatal("a block pool took session entries")
	}
	resync := Batch{Index: 4, Replace: true, Sessions: []Change{stored(SessionOwner, b)}}
	if err := sp.Apply(resync.SessionBatch()); err != nil {
		t.Fatal(err)
	}
	if _, seq := sp.Epoch(); seq != 2 {
		t.Fatalf("identical session resync published: seq %d", seq)
	}
}
