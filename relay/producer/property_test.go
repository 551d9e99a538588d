package producer

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

// genChange draws a change over a small universe so that blocks are shared
// between ranks and removals often hit held blocks.
func genChange(t *rapid.T) Change {
	w := routing.Worker{ID: routing.WorkerID(rapid.IntRange(1, 3).Draw(t, "id")), Rank: uint32(rapid.IntRange(0, 1).Draw(t, "rank"))}
	kind := ChangeKind(rapid.IntRange(int(Stored), int(WorkerRemoved)).Draw(t, "kind"))
	if kind >= RankCleared && rapid.IntRange(0, 4).Draw(t, "rare") != 0 {
		kind = Stored
	}
	hs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) routing.SeqHash {
		return routing.SeqHash(rapid.Uint64Range(1, 200).Draw(t, "h") * 0x9E3779B97F4A7C15)
	}), 0, 8).Draw(t, "hashes")
	return Change{Kind: kind, Worker: w, Hashes: hs}
}

// model is the exact ownership the producer must agree with.
type model map[routing.Worker]map[routing.SeqHash]bool

func (m model) apply(c Change) {
	switch c.Kind {
	case Stored:
		if m[c.Worker] == nil {
			m[c.Worker] = map[routing.SeqHash]bool{}
		}
		for _, h := range c.Hashes {
			m[c.Worker][h] = true
		}
	case Removed:
		for _, h := range c.Hashes {
			delete(m[c.Worker], h)
		}
	case RankCleared:
		delete(m, c.Worker)
	case WorkerRemoved:
		for w := range m {
			if w.ID == c.Worker.ID {
				delete(m, w)
			}
		}
	}
}

func (m model) refs() map[routing.SeqHash]int {
	r := map[routing.SeqHash]int{}
	for _, held := range m {
		for h := range held {
			r[h]++
		}
	}
	return r
}

// TestPropertyNoFalseNegativesAndConvergence: under any change sequence,
// reference counts match the exact model, every held block is present in
// the published filter, and a subscriber that resubscribes whenever its feed
// ends converges byte for byte.
func TestPropertyNoFalseNegativesAndConvergence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kind := rapid.SampledFrom([]filter.Kind{filter.KindCuckoo, filter.KindCuckooCompact, filter.KindBloom}).Draw(t, "kind")
		p, err := New(testPool, Config{Filter: filter.Config{Kind: kind, Capacity: 32, Seed: 9}, QueueLen: 4},
			rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1)))
		if err != nil {
			t.Fatal(err)
		}
		exact := model{}
		f, _ := p.Subscribe()
		m := newMirror(t, f)
		for range rapid.IntRange(1, 60).Draw(t, "batches") {
			b := Batch{Changes: rapid.SliceOfN(rapid.Custom(genChange), 1, 4).Draw(t, "batch")}
			if err := p.Apply(b); err != nil {
				t.Fatal(err)
			}
			for _, c := range b.Changes {
				exact.apply(c)
			}
			if rapid.Bool().Draw(t, "read") {
				f, m = catchUp(t, p, f, m)
			}
		}
		f, m = catchUp(t, p, f, m)
		m.assertSame(t, p)
		refs := exact.refs()
		for h, n := range refs {
			if p.Refs(h) != n {
				t.Fatalf("refs(%#x) = %d, want %d", h, p.Refs(h), n)
			}
			if !m.c.Contains(h) {
				t.Fatalf("held block %#x missing from the published filter", h)
			}
		}
		if s := p.Stats(); s.Blocks != len(refs) || s.Inconsistencies != 0 || s.Omitted != 0 {
			t.Fatalf("stats %+v, exact blocks %d", s, len(refs))
		}
		f.Close()
	})
}

// catchUp drains f into m, resubscribing from a snapshot if f ended.
func catchUp(t tb, p *Producer, f *Feed, m *mirror) (*Feed, *mirror) {
	for {
		select {
		case u, ok := <-f.Updates():
			if !ok {
				f, _ = p.Subscribe()
				return f, newMirror(t, f)
			}
			m.apply(t, u)
		default:
			return f, m
		}
	}
}
