package producer

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

// stateOf returns the replacing batch of a model at index.
func stateOf(m model, index uint64) Batch {
	b := Batch{Index: index, Replace: true}
	for w, held := range m {
		c := Change{Kind: Stored, Worker: w}
		for h := range held {
			c.Hashes = append(c.Hashes, h)
		}
		slices.Sort(c.Hashes)
		b.Changes = append(b.Changes, c)
	}
	return b
}

// fill applies n rank-sized batches of new blocks and returns the model.
func fill(t *testing.T, p *Producer, ranks, blocks int) model {
	t.Helper()
	m := model{}
	for r := range ranks {
		w := routing.Worker{ID: routing.WorkerID(r + 1)}
		c := Change{Kind: Stored, Worker: w}
		for i := range blocks {
			c.Hashes = append(c.Hashes, routing.SeqHash(uint64(r*blocks+i+1)*0x9E3779B97F4A7C15))
		}
		if err := p.Apply(Batch{Index: uint64(r + 1), Changes: []Change{c}}); err != nil {
			t.Fatal(err)
		}
		m.apply(c)
	}
	return m
}

// TestReplaceIdenticalPublishesNothing: a resync to the state the producer
// already holds changes nothing, publishes no delta and keeps the feed's
// sequence where it was; the next real change is the next seq.
func TestReplaceIdenticalPublishesNothing(t *testing.T) {
	p := newTestProducer(t, 4096, 64)
	m := fill(t, p, 4, 200)
	f, err := p.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	mir := newMirror(t, f)
	epoch, seq := p.Epoch()
	if err := p.Apply(stateOf(m, 10)); err != nil {
		t.Fatal(err)
	}
	if e, s := p.Epoch(); e != epoch || s != seq {
		t.Fatalf("identical resync moved (epoch, seq) from (%#x, %d) to (%#x, %d)", epoch, seq, e, s)
	}
	if n := len(f.Updates()); n != 0 {
		t.Fatalf("identical resync queued %d updates", n)
	}
	st := p.Stats()
	if st.Replaces != 1 || st.ReplaceDropped != 0 || st.ReplaceStored != 0 || st.Blocks != 800 {
		t.Fatalf("stats %+v", st)
	}
	w := routing.Worker{ID: 1}
	if err := p.Apply(Batch{Index: 11, Changes: []Change{stored(w, 77)}}); err != nil {
		t.Fatal(err)
	}
	mir.drain(t, f)
	if mir.seq != seq+1 {
		t.Fatalf("next change published seq %d, want %d", mir.seq, seq+1)
	}
	mir.assertSame(t, p)
}

// TestReplaceAppliesOnlyTheDifference: a resync to a changed state drops
// and stores exactly the pairs that differ, in one delta, and the
// subscriber's mirror stays byte-identical.
func TestReplaceAppliesOnlyTheDifference(t *testing.T) {
	p := newTestProducer(t, 4096, 64)
	m := fill(t, p, 3, 100)
	f, _ := p.Subscribe()
	mir := newMirror(t, f)
	_, seq := p.Epoch()
	w1, w2, w9 := routing.Worker{ID: 1}, routing.Worker{ID: 2}, routing.Worker{ID: 9}
	gone := m[w1]
	delete(m, w1)                                                          // a whole rank left
	m.apply(stored(w9, 5, 6, 7))                                           // a new rank
	m.apply(Change{Kind: Removed, Worker: w2, Hashes: firstOf(m[w2], 10)}) // part of a rank
	if err := p.Apply(stateOf(m, 10)); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.ReplaceDropped != uint64(len(gone)+10) || st.ReplaceStored != 3 {
		t.Fatalf("dropped %d stored %d, want %d and 3", st.ReplaceDropped, st.ReplaceStored, len(gone)+10)
	}
	mir.drain(t, f)
	if mir.seq != seq+1 {
		t.Fatalf("resync published up to seq %d, want one delta at %d", mir.seq, seq+1)
	}
	mir.assertSame(t, p)
	for h, n := range m.refs() {
		if p.Refs(h) != n {
			t.Fatalf("refs(%#x) = %d, want %d", h, p.Refs(h), n)
		}
	}
	if st.Blocks != len(m.refs()) || st.Inconsistencies != 0 {
		t.Fatalf("stats %+v, want %d blocks", st, len(m.refs()))
	}
}

// firstOf returns n hashes of a set, sorted.
func firstOf(set map[routing.SeqHash]bool, n int) []routing.SeqHash {
	var out []routing.SeqHash
	for h := range set {
		out = append(out, h)
	}
	slices.Sort(out)
	return out[:min(n, len(out))]
}

func TestReplaceRefusesOtherKinds(t *testing.T) {
	tests := []struct {
		name string
		kind ChangeKind
	}{
		{name: "removed", kind: Removed},
		{name: "rank cleared", kind: RankCleared},
		{name: "worker removed", kind: WorkerRemoved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProducer(t, 1024, 4)
			err := p.Apply(Batch{Replace: true, Changes: []Change{stored(w1, 1), {Kind: tt.kind, Worker: w1}}})
			if !errors.Is(err, ErrInvalidChange) || p.Stats().Blocks != 0 {
				t.Fatalf("err %v, blocks %d", err, p.Stats().Blocks)
			}
		})
	}
}

// TestPropertyReplaceConverges: from any state, a replacing batch leaves
// exactly the target's reference counts, publishes at most one delta, and
// a subscriber converges byte for byte.
func TestPropertyReplaceConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, err := New(testPool, Config{Filter: filter.Config{Capacity: 512, Seed: 9}, QueueLen: 64},
			rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1)))
		if err != nil {
			t.Fatal(err)
		}
		before, target := model{}, model{}
		for range rapid.IntRange(0, 20).Draw(t, "before") {
			c := genChange(t)
			before.apply(c)
			if err := p.Apply(Batch{Changes: []Change{c}}); err != nil {
				t.Fatal(err)
			}
		}
		for range rapid.IntRange(0, 20).Draw(t, "target") {
			c := genChange(t)
			c.Kind = Stored
			target.apply(c)
		}
		f, _ := p.Subscribe()
		m := newMirror(t, f)
		epoch, seq := p.Epoch()
		unknown := p.Stats().UnknownRemovals
		if err := p.Apply(stateOf(target, 0)); err != nil {
			t.Fatal(err)
		}
		if e, s := p.Epoch(); e == epoch && s > seq+1 {
			t.Fatalf("replace published %d deltas", s-seq)
		}
		_, m = catchUp(t, p, f, m)
		m.assertSame(t, p)
		refs := target.refs()
		for h, n := range refs {
			if p.Refs(h) != n {
				t.Fatalf("refs(%#x) = %d, want %d", h, p.Refs(h), n)
			}
		}
		if st := p.Stats(); st.Blocks != len(refs) || st.Inconsistencies != 0 || st.UnknownRemovals != unknown {
			t.Fatalf("stats %+v, target blocks %d", st, len(refs))
		}
	})
}
