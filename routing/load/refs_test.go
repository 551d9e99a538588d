package load

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/routing"
)

// TestRefTableMatchesMap runs random increments and decrements against a
// map model. Keys come from a small set, including 0 and keys that differ
// in one bit, so that probe runs form, wrap around the end of the table
// and are repaired by deletion, and the table grows past its first size.
func TestRefTableMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfNDistinct(rapid.Uint64(), 1, 600, rapid.ID).Draw(t, "keys")
		keys = append(keys, 0, 1, 1<<63)
		tab := newRefTable(rapid.IntRange(0, 64).Draw(t, "size"))
		tab.seed = rapid.Uint64().Draw(t, "seed")
		model := map[routing.SeqHash]int32{}
		for range rapid.IntRange(1, 3000).Draw(t, "ops") {
			h := routing.SeqHash(rapid.SampledFrom(keys).Draw(t, "key"))
			if rapid.IntRange(0, 2).Draw(t, "op") > 0 {
				if got, want := tab.inc(h), model[h] == 0; got != want {
					t.Fatalf("inc(%x) new = %v, want %v", h, got, want)
				}
				model[h]++
				continue
			}
			want := model[h] == 1
			if got := tab.dec(h); got != want {
				t.Fatalf("dec(%x) gone = %v, want %v", h, got, want)
			}
			switch {
			case model[h] > 1:
				model[h]--
			case model[h] == 1:
				delete(model, h)
			}
		}
		if tab.len() != len(model) {
			t.Fatalf("len %d, want %d", tab.len(), len(model))
		}
		for _, k := range keys {
			if got, want := tab.count(routing.SeqHash(k)), model[routing.SeqHash(k)]; got != want {
				t.Fatalf("count(%x) = %d, want %d", k, got, want)
			}
		}
	})
}

// TestRefTableEmptiesCompletely checks that a table whose entries were all
// removed has no slot left in use, so that it can be handed to another
// worker as the spare.
func TestRefTableEmptiesCompletely(t *testing.T) {
	tab := newRefTable(0)
	hashes := chain(make([]uint64, 1000)...)
	for _, h := range hashes {
		tab.inc(h)
		tab.inc(h)
	}
	for _, h := range hashes {
		tab.dec(h)
		tab.dec(h)
	}
	for i, s := range tab.slots {
		if s.n != 0 {
			t.Fatalf("slot %d still holds %x (%d)", i, s.hash, s.n)
		}
	}
	if tab.len() != 0 || tab.peak != 1000 {
		t.Fatalf("len %d peak %d, want 0 and 1000", tab.len(), tab.peak)
	}
}
