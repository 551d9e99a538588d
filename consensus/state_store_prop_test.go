package consensus

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// TestStoreStateMirrorsMemState drives a StoreState and a MemState with
// the same random writes, committing now and then, and checks that the
// reopened store equals the MemState as of the last commit.
func TestStoreStateMirrorsMemState(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fs := vfs.NewMem()
		f, st, done := openStoreFSM(t, fs, "fsm")
		mem := NewFSM(nil, nil, nil)
		_, hash := mem.StateHash()
		var index uint64
		ops := rapid.IntRange(1, 60).Draw(rt, "ops")
		for range ops {
			w := routing.Worker{ID: routing.WorkerID(rapid.Uint64Range(1, 3).Draw(rt, "id")), Rank: rapid.Uint32Range(0, 1).Draw(rt, "rank")}
			h := rapid.Uint64Range(1, 8).Draw(rt, "h")
			key := string(rune('a' + rapid.IntRange(0, 4).Draw(rt, "key")))
			write := func(s State) {}
			switch rapid.IntRange(0, 10).Draw(rt, "op") {
			case 0:
				write = func(s State) { s.PutSession(&kvrpb.RaftBinding{Key: key, WorkerId: uint64(w.ID), Version: h}) }
			case 1:
				write = func(s State) { s.DeleteSession(key) }
			case 2:
				write = func(s State) { s.SetCursor(w, h) }
			case 3:
				write = func(s State) { s.PutBlock(w, routing.EngineHash(h), routing.SeqHash(h*7)) }
			case 4:
				write = func(s State) { s.DeleteBlock(w, routing.EngineHash(h)) }
			case 5:
				tiers := uint8(rapid.IntRange(0, 7).Draw(rt, "tiers"))
				write = func(s State) { s.SetTiers(w, routing.SeqHash(h*7), tiers) }
			case 6:
				write = func(s State) { s.ClearRank(w) }
			case 7:
				write = func(s State) { s.DropRank(w) }
			case 8:
				write = func(s State) { s.RememberRequest(key+"-"+string(rune('0'+h)), &kvrpb.RaftResult{Index: h}, 4) }
			case 9:
				write = func(s State) {
					s.PutWorker(&kvrpb.RaftWorkerRecord{Card: &kvrpb.WorkerCard{EngineId: uint64(w.ID)}, Dc: key})
				}
			case 10:
				write = func(s State) { s.DeleteWorker(w.ID) }
			}
			write(f.st)
			write(mem.st)
			if rapid.Bool().Draw(rt, "commit") {
				index++
				if err := st.Commit(index, 1); err != nil {
					rt.Fatal(err)
				}
				_, hash = mem.StateHash()
			}
		}
		done()
		g, st2, done2 := openStoreFSM(t, fs, "fsm")
		defer done2()
		if _, got := g.StateHash(); got != hash || st2.Applied() != index {
			rt.Fatalf("reopened (%d, %x), want (%d, %x)", st2.Applied(), got, index, hash)
		}
	})
}
