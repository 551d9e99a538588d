package consensus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
	"github.com/kvrouter/kvrouter/store"
)

// storedEvent returns a root stored event of n blocks on the device
// tier, with engine ids and local hashes derived from salt.
func storedEvent(w routing.Worker, id, salt uint64, n int) routing.Event {
	ev := routing.Event{Worker: w, ID: id, Kind: routing.EventStored, Tier: routing.TierDevice}
	for i := range uint64(n) {
		ev.Blocks = append(ev.Blocks, routing.StoredBlock{
			Engine: routing.EngineHash(salt<<16 | i), Local: routing.LocalHash(salt*1000 + i)})
	}
	return ev
}

// chainHashes returns the sequence hashes of a root event's blocks.
func chainHashes(ev routing.Event) []routing.SeqHash {
	var out []routing.SeqHash
	for i, b := range ev.Blocks {
		if i == 0 {
			out = append(out, routing.SeqHash(b.Local))
			continue
		}
		out = append(out, routing.Chain(out[i-1], b.Local))
	}
	return out
}

// replaceCmd builds one replace-rank chunk.
func replaceCmd(w routing.Worker, first, last bool, cursor uint64, evs ...routing.Event) *kvrpb.RaftReplaceRank {
	c := &kvrpb.RaftReplaceRank{EngineId: uint64(w.ID), Rank: w.Rank, First: first, Last: last, Cursor: cursor}
	for i := range evs {
		c.Events = append(c.Events, wire.EncodeEvent(&evs[i]))
	}
	return c
}

// deviceMatch returns how many leading hashes f's index places on w.
func deviceMatch(f *FSM, w routing.Worker, hs []routing.SeqHash) int {
	for _, m := range f.Index().FindMatches(hs, nil) {
		if m.Worker == w {
			return int(m.Device)
		}
	}
	return 0
}

func TestReplaceRankReplacesTablesAndIndex(t *testing.T) {
	w, other := routing.Worker{ID: 4, Rank: 1}, routing.Worker{ID: 5}
	old := kvBatch(w, 1, 3, 9)
	snap := []routing.Event{storedEvent(w, 0, 21, 40), storedEvent(w, 0, 22, 7)}
	oldHashes := []routing.SeqHash{9000, routing.Chain(9000, 9001)}
	tests := []struct {
		name   string
		budget int
	}{
		{"one chunk", 1 << 20},
		{"chunks and split events", 400},
	}
	var hashes []uint64
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFSM(nil, nil, nil)
			applyAt(t, f, 1, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{old, kvBatch(other, 1, 2, 3)}})
			chunks, err := replaceChunks(w, snap, 77, tc.budget)
			if err != nil {
				t.Fatal(err)
			}
			if tc.budget < 1000 && len(chunks) < 3 {
				t.Fatalf("%d chunks, want several", len(chunks))
			}
			for i, c := range chunks {
				if r := applyAt(t, f, uint64(i+2), c); r.Code != uint32(CodeOK) {
					t.Fatalf("chunk %d: %v", i, r)
				}
			}
			if c, _ := f.Cursor(w); c != 77 {
				t.Fatalf("cursor %d, want 77", c)
			}
			if c, _ := f.Index().Cursor(w); c != 77 {
				t.Fatalf("index cursor %d, want 77", c)
			}
			if n := deviceMatch(f, w, oldHashes); n != 0 {
				t.Fatalf("replaced blocks still matched: %d", n)
			}
			for _, ev := range snap {
				if n := deviceMatch(f, w, chainHashes(ev)); n != len(ev.Blocks) {
					t.Fatalf("snapshot event matched %d of %d blocks", n, len(ev.Blocks))
				}
			}
			if c, _ := f.Cursor(other); c != 2 {
				t.Fatalf("other rank's cursor %d", c)
			}
			_, h := f.StateHash()
			hashes = append(hashes, h)
			sameTables(t, snapshotRoundTrip(t, f), f)
		})
	}
	if len(hashes) == 2 && hashes[0] != hashes[1] {
		t.Fatal("chunked and single replacements differ")
	}
}

func TestReplaceRankLeavesSubsetWhileInProgress(t *testing.T) {
	w := routing.Worker{ID: 4}
	f := NewFSM(nil, nil, nil)
	applyAt(t, f, 1, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 1, 3, 9)}})
	a, b := storedEvent(w, 0, 21, 3), storedEvent(w, 0, 22, 3)
	applyAt(t, f, 2, replaceCmd(w, true, false, 0, a))
	if c, ok := f.Cursor(w); c != 0 || !ok {
		t.Fatalf("cursor %d %v mid-replacement, want 0", c, ok)
	}
	if deviceMatch(f, w, chainHashes(a)) != 3 || deviceMatch(f, w, []routing.SeqHash{9000}) != 0 {
		t.Fatal("first chunk not in the index, or old blocks left")
	}
	applyAt(t, f, 3, replaceCmd(w, false, false, 0, b))
	applyAt(t, f, 4, replaceCmd(w, false, true, 12))
	if deviceMatch(f, w, chainHashes(b)) != 3 {
		t.Fatal("middle chunk not in the index after the last chunk")
	}
	if c, _ := f.Cursor(w); c != 12 {
		t.Fatalf("cursor %d", c)
	}
}

func TestReplaceRankValidation(t *testing.T) {
	w := routing.Worker{ID: 4}
	removed := routing.Event{Worker: w, Kind: routing.EventRemoved, Removed: []routing.EngineHash{1}}
	tooMany := replaceCmd(w, true, true, 1)
	for range MaxReplaceEvents + 1 {
		tooMany.Events = append(tooMany.Events, tooMany.Events...)
		if len(tooMany.Events) == 0 {
			ev := storedEvent(w, 0, 1, 1)
			tooMany.Events = append(tooMany.Events, wire.EncodeEvent(&ev))
		}
		if len(tooMany.Events) > MaxReplaceEvents {
			break
		}
	}
	noBlocks := replaceCmd(w, true, true, 1)
	noBlocks.Events = []*kvrpb.KVEvent{{Data: &kvrpb.KVEvent_Stored{Stored: &kvrpb.Stored{}}}}
	tests := []struct {
		name string
		cmd  *kvrpb.RaftReplaceRank
	}{
		{"removed event", replaceCmd(w, true, true, 1, removed)},
		{"stored event without blocks", noBlocks},
		{"too many events", tooMany},
		{"event without data", &kvrpb.RaftReplaceRank{Events: []*kvrpb.KVEvent{{EventId: 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Encode(tc.cmd); !errors.Is(err, ErrBadCommand) {
				t.Fatalf("Encode: %v", err)
			}
			// An entry that bypassed validation changes nothing and does
			// not halt the FSM.
			f := NewFSM(nil, nil, nil)
			applyAt(t, f, 1, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 1, 1, 9)}})
			_, before := f.StateHash()
			data, err := encodeTyped(TypeReplaceRank, tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			r, err := unwrapResponse(f.Apply(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: data}))
			if err != nil || r.Code != uint32(CodeInvalid) {
				t.Fatalf("apply: %v %v", r, err)
			}
			if _, after := f.StateHash(); after != before || f.Halted() != nil {
				t.Fatal("a refused chunk changed the state or halted the FSM")
			}
		})
	}
	if _, err := replaceChunks(w, []routing.Event{storedEvent(routing.Worker{ID: 9}, 0, 1, 1)}, 1, 1<<10); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("event of another rank: %v", err)
	}
}

func TestCommandValidationBoundsStoreLimits(t *testing.T) {
	longDC := bindCmd("k", 1, 0, t0, "")
	longDC.Dc = strings.Repeat("d", store.MaxDCBytes+1)
	longReq := bindCmd("k", 1, 0, t0, strings.Repeat("r", store.MaxRequestIDBytes+1))
	card := &kvrpb.WorkerCard{EngineId: 7, DpSize: 1, Model: "m", BlockSize: 16, TotalKvBlocks: 100,
		MaxNumBatchedTokens: 8192, Checksum: "c", EndpointUrl: "http://e:8000"}
	cases := []struct {
		name string
		t    Type
		cmd  proto.Message
	}{
		{"bind dc over the store's bound", TypeBindSession, longDC},
		{"bind request id over the store's bound", TypeBindSession, longReq},
		{"unbind request id", TypeUnbindSession, &kvrpb.RaftUnbindSession{Key: "k", RequestId: strings.Repeat("r", 300)}},
		{"invalidate request id", TypeInvalidateEngine, &kvrpb.RaftInvalidateEngine{WorkerId: 1, RequestId: strings.Repeat("r", 300)}},
		{"register dc", TypeRegisterWorker, &kvrpb.RaftRegisterWorker{Card: card, Dc: strings.Repeat("d", 65)}},
		{"register oversized", TypeRegisterWorker, &kvrpb.RaftRegisterWorker{Card: card, Pool: "p",
			Dc: "dc", StampedUnixNanos: 1}},
	}
	cases[len(cases)-1].cmd.(*kvrpb.RaftRegisterWorker).Card = oversizedCard(card)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Encode(tc.cmd); !errors.Is(err, ErrBadCommand) {
				t.Fatalf("Encode: %v", err)
			}
			f, st, _ := openStoreFSM(t, vfs.NewMem(), "fsm")
			data, err := encodeTyped(tc.t, tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			r, err := unwrapResponse(f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}))
			if err != nil || r.Code != uint32(CodeInvalid) {
				t.Fatalf("apply: %v %v", r, err)
			}
			applyAt(t, f, 2, bindCmd("next", 1, 0, t0, ""))
			if st.Err() != nil || st.Applied() != 2 {
				t.Fatalf("store stopped: %v at %d", st.Err(), st.Applied())
			}
		})
	}
}

// oversizedCard returns a copy of c whose encoding is over the store's
// bound on a worker record, with a model name the card check accepts.
func oversizedCard(c *kvrpb.WorkerCard) *kvrpb.WorkerCard {
	big := proto.CloneOf(c)
	big.EndpointUrl = "http://e:8000/" + strings.Repeat("p", store.MaxCardBytes)
	return big
}

func TestReplaceRankOnCluster(t *testing.T) {
	c := newClusterWith(t, 3, func(cfg *Config) { cfg.MaxCommandBytes = 2 << 10 })
	l := c.leader()
	fl := c.nodes[c.follower(l)]
	ctx := context.Background()
	card := &kvrpb.WorkerCard{EngineId: 4, DpSize: 2, Model: "m", BlockSize: 16, TotalKvBlocks: 100,
		MaxNumBatchedTokens: 8192, Checksum: "c", EndpointUrl: "http://e:8000"}
	if err := fl.RegisterWorker(ctx, card, "dc1", "p"); err != nil {
		t.Fatal(err)
	}
	w, v := routing.Worker{ID: 4}, routing.Worker{ID: 4, Rank: 1}
	b := NewBatcher(fl, BatcherConfig{})
	for _, batch := range [][]routing.Event{kvEvents(w, 1, 3, 9), kvEvents(v, 1, 2, 8)} {
		if err := b.Add(batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	snap := []routing.Event{storedEvent(w, 0, 21, 200), storedEvent(w, 0, 22, 30)}
	// A replacement is idempotent; one cut by a leader change is
	// indeterminate and retried, as its callers do.
	waittest.UntilNil(t, time.Minute, "the rank replaced", func() error {
		err := fl.ReplaceRank(ctx, w, snap, 500)
		if err != nil && !Retryable(err) {
			t.Fatal(err)
		}
		return err
	})
	hs := c.converge()
	for i, h := range hs {
		if h != hs[0] {
			t.Fatalf("node %d hash %x, node 0 %x", i, h, hs[0])
		}
	}
	for _, n := range c.nodes {
		if cur, _ := n.FSM().Cursor(w); cur != 500 {
			t.Fatalf("node %s cursor %d", n.ID(), cur)
		}
		if got := deviceMatch(n.FSM(), w, chainHashes(snap[0])); got != 200 {
			t.Fatalf("node %s matches %d of 200 replaced blocks", n.ID(), got)
		}
		if got := deviceMatch(n.FSM(), w, []routing.SeqHash{9000}); got != 0 {
			t.Fatalf("node %s kept a replaced block", n.ID())
		}
	}
	removed, err := fl.RemoveWorker(ctx, 4)
	if err != nil || removed != 3 {
		t.Fatalf("removed %d rows, err %v; want card and two ranks", removed, err)
	}
	c.converge()
	for _, n := range c.nodes {
		_, okw := n.FSM().Worker(4)
		_, okc := n.FSM().Cursor(v)
		if okw || okc || len(n.FSM().Index().Workers()) != 0 {
			t.Fatalf("node %s kept engine state", n.ID())
		}
	}
	if err := fl.ReplaceRank(ctx, routing.Worker{ID: 9}, snap, 1); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("replace with another rank's events: %v", err)
	}
	if err := fl.RegisterWorker(ctx, &kvrpb.WorkerCard{}, "dc1", ""); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("register of a bad card: %v", err)
	}
}
