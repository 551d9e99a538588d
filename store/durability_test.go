package store

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// crash returns a crash clone of fs holding only synced data (and, with a
// non-nil rng, a random share of unsynced data).
func crash(fs *vfs.MemFS, rng *rand.Rand) *vfs.MemFS {
	if rng == nil {
		return fs.CrashClone(vfs.CrashCloneCfg{})
	}
	return fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng})
}

func TestLogStoreAcknowledgedWritesSurviveCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openLog(t, fs)
	storeRange(t, s, 1, 50)
	if err := errors.Join(s.SetUint64([]byte("CurrentTerm"), 7), s.DeleteRange(1, 10)); err != nil {
		t.Fatal(err)
	}
	clone := crash(fs, nil)
	r := openLog(t, clone)
	if f, l := bounds(t, r); f != 11 || l != 50 {
		t.Fatalf("after crash first, last = %d, %d; want 11, 50", f, l)
	}
	var got raft.Log
	if err := r.GetLog(50, &got); err != nil {
		t.Fatal(err)
	}
	assertLogEqual(t, &got, mkLog(50))
	if v, err := r.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("CurrentTerm after crash = %d, %v", v, err)
	}
}

// fillIndex writes the rows that batch i of the crash test owns; the 2 KiB
// card makes the WAL large enough that unsynced blocks reach the file.
func fillIndex(b *Batch, i uint64) {
	b.PutOwner(i, 0, i*31, 1)
	b.PutCursor(1, 0, i)
	b.PutWorker(i, make([]byte, 2048))
	b.PutEngineBlock(i, 0, i*7, i*31)
	b.PutRequest(i, requestIDOf(i), []byte("done"))
}

// requestIDOf names the request batch i of the crash test remembers.
func requestIDOf(i uint64) string { return "req-" + strconv.FormatUint(i, 10) }

// TestFSMAppliedNeverAheadOfData commits batches, syncs after the first
// synced of them, commits more without a sync, crashes keeping a random
// share of unsynced bytes, and checks that the recovered state is exactly
// the prefix of batches up to the recovered applied index, and no shorter
// than what was synced.
func TestFSMAppliedNeverAheadOfData(t *testing.T) {
	const synced, n = 100, 400
	for seed := uint64(1); seed <= 8; seed++ {
		fs := vfs.NewCrashableMem()
		s := openFSM(t, fs)
		for i := uint64(1); i <= n; i++ {
			commit(t, s, i, func(b *Batch) { fillIndex(b, i) })
			if i == synced {
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
			}
		}
		clone := crash(fs, rand.New(rand.NewPCG(seed, 99)))
		r := openFSM(t, clone)
		applied, _, err := r.Applied()
		if err != nil {
			t.Fatal(err)
		}
		if applied < synced {
			t.Fatalf("seed %d: applied %d after crash, below the synced %d", seed, applied, synced)
		}
		assertPrefixState(t, r, applied)
		t.Logf("seed %d: recovered applied index %d of %d", seed, applied, n)
	}
}

// assertPrefixState checks that r holds exactly batches 1..applied.
func assertPrefixState(t *testing.T, r *FSMStore, applied uint64) {
	t.Helper()
	cur, err := r.Cursor(1, 0)
	if applied == 0 && !errors.Is(err, ErrNotFound) || applied > 0 && cur != applied {
		t.Fatalf("cursor = %d (%v) with applied index %d", cur, err, applied)
	}
	rows := owners(t, r)
	var cards int
	_ = r.ScanWorkers(func(WorkerCard) error { cards++; return nil })
	if uint64(len(rows)) != applied || uint64(cards) != applied {
		t.Fatalf("%d owner rows, %d cards with applied index %d", len(rows), cards, applied)
	}
	for i, o := range rows {
		if o.Worker != uint64(i+1) {
			t.Fatalf("row %d is worker %d: state is not a prefix", i, o.Worker)
		}
	}
	assertPrefixNewTables(t, r, applied)
}

// assertPrefixNewTables checks the engine block and request tables of
// assertPrefixState: one row per batch, in batch order, and the newest
// request reachable by id.
func assertPrefixNewTables(t *testing.T, r *FSMStore, applied uint64) {
	t.Helper()
	eng, reqs := engineRows(t, r), requestRows(t, r)
	if uint64(len(eng)) != applied || uint64(len(reqs)) != applied {
		t.Fatalf("%d engine rows, %d requests with applied index %d", len(eng), len(reqs), applied)
	}
	for i := range eng {
		if n := uint64(i + 1); eng[i].Worker != n || reqs[i].Seq != n || reqs[i].ID != requestIDOf(n) {
			t.Fatalf("row %d is engine %+v, request %+v: state is not a prefix", i, eng[i], reqs[i])
		}
	}
	if applied == 0 {
		return
	}
	if got, err := r.Request(requestIDOf(applied)); err != nil || got.Seq != applied {
		t.Fatalf("Request(%q) = %+v, %v", requestIDOf(applied), got, err)
	}
}

func TestFSMSyncMakesCommitsDurable(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openFSM(t, fs)
	for i := uint64(1); i <= 20; i++ {
		commit(t, s, i, func(b *Batch) { fillIndex(b, i) })
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	r := openFSM(t, crash(fs, nil))
	if applied, _, _ := r.Applied(); applied != 20 {
		t.Fatalf("applied after synced crash = %d, want 20", applied)
	}
	assertPrefixState(t, r, 20)
}
