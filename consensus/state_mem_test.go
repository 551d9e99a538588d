package consensus

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/routing"
)

// memModel is a plain reference for MemState's rank tables, without the
// last-rank cache.
type memModel struct {
	cursors map[routing.Worker]uint64
	blocks  map[routing.Worker]map[routing.EngineHash]routing.SeqHash
	tiers   map[routing.Worker]map[routing.SeqHash]uint8
}

func newMemModel() *memModel {
	return &memModel{map[routing.Worker]uint64{},
		map[routing.Worker]map[routing.EngineHash]routing.SeqHash{}, map[routing.Worker]map[routing.SeqHash]uint8{}}
}

// touch creates w's rank as MemState.rank does.
func (m *memModel) touch(w routing.Worker) {
	if _, ok := m.cursors[w]; !ok {
		m.cursors[w] = 0
		m.blocks[w] = map[routing.EngineHash]routing.SeqHash{}
		m.tiers[w] = map[routing.SeqHash]uint8{}
	}
}

// TestMemStateRankCacheMatchesModel interleaves writes to a few ranks with
// drops, clears and resets, and checks every read against the model: the
// last-rank cache must never serve a dropped or reset rank.
func TestMemStateRankCacheMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, m := NewMemState(), newMemModel()
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			w := routing.Worker{ID: routing.WorkerID(rapid.IntRange(1, 3).Draw(t, "w"))}
			k := rapid.Uint64Range(1, 4).Draw(t, "k")
			switch rapid.IntRange(0, 6).Draw(t, "op") {
			case 0:
				s.SetCursor(w, k)
				m.touch(w)
				m.cursors[w] = k
			case 1:
				s.PutBlock(w, routing.EngineHash(k), routing.SeqHash(k*10))
				m.touch(w)
				m.blocks[w][routing.EngineHash(k)] = routing.SeqHash(k * 10)
			case 2:
				s.SetTiers(w, routing.SeqHash(k), uint8(k%3))
				if k%3 == 0 {
					if _, ok := m.tiers[w]; ok {
						delete(m.tiers[w], routing.SeqHash(k))
					}
				} else {
					m.touch(w)
					m.tiers[w][routing.SeqHash(k)] = uint8(k % 3)
				}
			case 3:
				s.DropRank(w)
				delete(m.cursors, w)
				delete(m.blocks, w)
				delete(m.tiers, w)
			case 4:
				s.ClearRank(w)
				if _, ok := m.cursors[w]; ok {
					clear(m.blocks[w])
					clear(m.tiers[w])
				}
			case 5:
				s.Reset()
				*m = *newMemModel()
			case 6:
				s.DeleteBlock(w, routing.EngineHash(k))
				if b, ok := m.blocks[w]; ok {
					delete(b, routing.EngineHash(k))
				}
			}
			for id := routing.WorkerID(1); id <= 3; id++ {
				v := routing.Worker{ID: id}
				cur, ok := s.Cursor(v)
				wantCur, wantOK := m.cursors[v]
				if cur != wantCur || ok != wantOK {
					t.Fatalf("cursor of %v: %d %v, want %d %v", v, cur, ok, wantCur, wantOK)
				}
				for k := uint64(1); k <= 4; k++ {
					seq, ok := s.Block(v, routing.EngineHash(k))
					wantSeq, wantOK := m.blocks[v][routing.EngineHash(k)]
					if seq != wantSeq || ok != wantOK {
						t.Fatalf("block %d of %v: %d %v, want %d %v", k, v, seq, ok, wantSeq, wantOK)
					}
					if got, want := s.Tiers(v, routing.SeqHash(k)), m.tiers[v][routing.SeqHash(k)]; got != want {
						t.Fatalf("tiers %d of %v: %d, want %d", k, v, got, want)
					}
				}
			}
		}
	})
}
