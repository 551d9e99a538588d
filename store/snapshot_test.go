package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"github.com/zeebo/xxh3"
	"pgregory.net/rapid"
)

// contents is every row of every FSM table plus the applied index.
type contents struct {
	Index, Term uint64
	Owners      []Owner
	Cursors     []Cursor
	Workers     []WorkerCard
	Sessions    []Session
	Engine      []EngineBlock
	Requests    []Request
	// Lookups holds Request(id) for every id in Requests, in that order.
	Lookups []Request
}

// dump reads the whole state of s.
func dump(t testing.TB, s *FSMStore) contents {
	t.Helper()
	var c contents
	var err error
	c.Index, c.Term, err = s.Applied()
	err = errors.Join(err,
		s.ScanOwners(func(o Owner) error { c.Owners = append(c.Owners, o); return nil }),
		s.ScanCursors(func(r Cursor) error { c.Cursors = append(c.Cursors, r); return nil }),
		s.ScanWorkers(func(w WorkerCard) error { c.Workers = append(c.Workers, w); return nil }),
		s.ScanSessions(func(r Session) error { c.Sessions = append(c.Sessions, r); return nil }),
		s.ScanEngineBlocks(func(e EngineBlock) error { c.Engine = append(c.Engine, e); return nil }),
		s.ScanRequests(func(r Request) error { c.Requests = append(c.Requests, r); return nil }))
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	for _, r := range c.Requests {
		got, err := s.Request(r.ID)
		if err != nil {
			t.Fatalf("dump: Request(%q): %v", r.ID, err)
		}
		c.Lookups = append(c.Lookups, got)
	}
	return c
}

// genBatch draws random writes for every table into b.
func genBatch(t *rapid.T, b *Batch) {
	small := rapid.Uint64Range(0, 5)
	for _, n := range rapid.SliceOfN(rapid.Uint64(), 0, 40).Draw(t, "hashes") {
		b.PutOwner(small.Draw(t, "worker"), uint32(small.Draw(t, "rank")), n,
			TierMask(rapid.Uint8Range(1, 255).Draw(t, "tiers")))
	}
	for range rapid.IntRange(0, 8).Draw(t, "cursors") {
		b.PutCursor(rapid.Uint64().Draw(t, "cw"), rapid.Uint32().Draw(t, "cr"), rapid.Uint64().Draw(t, "ev"))
	}
	for range rapid.IntRange(0, 8).Draw(t, "workers") {
		b.PutWorker(rapid.Uint64().Draw(t, "w"), rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "card"))
	}
	for range rapid.IntRange(0, 8).Draw(t, "sessions") {
		b.PutSession(genSession(t))
	}
	genEngineBlocks(t, b)
	genRequests(t, b)
}

// genEngineBlocks draws engine block ids for a few ranks and sometimes
// range-deletes one rank or worker in the same batch.
func genEngineBlocks(t *rapid.T, b *Batch) {
	small := rapid.Uint64Range(0, 5)
	for _, eh := range rapid.SliceOfN(rapid.Uint64(), 0, 40).Draw(t, "engine hashes") {
		b.PutEngineBlock(small.Draw(t, "ew"), uint32(small.Draw(t, "er")), eh, rapid.Uint64().Draw(t, "seq"))
	}
	switch rapid.IntRange(0, 2).Draw(t, "engine delete") {
	case 1:
		b.DeleteEngineBlocksOfRank(small.Draw(t, "dw"), uint32(small.Draw(t, "dr")))
	case 2:
		b.DeleteEngineBlocksOfWorker(small.Draw(t, "dw"))
	}
}

// genRequests remembers distinct ids at increasing sequences and evicts a
// drawn number of the oldest, as consensus's bounded memory does.
func genRequests(t *rapid.T, b *Batch) {
	ids := rapid.SliceOfNDistinct(rapid.StringN(1, 16, MaxRequestIDBytes), 0, 12, rapid.ID[string]).Draw(t, "ids")
	seq := rapid.Uint64Range(0, 1<<32).Draw(t, "first seq")
	var seqs []uint64
	for _, id := range ids {
		seq += rapid.Uint64Range(1, 3).Draw(t, "gap")
		seqs = append(seqs, seq)
		b.PutRequest(seq, id, rapid.SliceOfN(rapid.Byte(), 0, 32).Draw(t, "result"))
	}
	for i := range rapid.IntRange(0, len(ids)).Draw(t, "evict") {
		b.DeleteRequest(seqs[i], ids[i])
	}
}

// genSession draws a valid session binding.
func genSession(t *rapid.T) Session {
	return Session{
		Key:               rapid.StringN(1, 24, MaxSessionKeyBytes).Draw(t, "key"),
		Worker:            rapid.Uint64().Draw(t, "sw"),
		Rank:              rapid.Uint32().Draw(t, "sr"),
		DC:                rapid.StringN(0, 8, MaxDCBytes).Draw(t, "dc"),
		Version:           rapid.Uint64().Draw(t, "ver"),
		Fence:             rapid.Uint64().Draw(t, "fence"),
		IdleDeadlineNanos: rapid.Int64().Draw(t, "idle"),
		Parent:            rapid.StringN(0, 24, MaxSessionKeyBytes).Draw(t, "parent"),
		Active:            rapid.Bool().Draw(t, "active"),
	}
}

// snapshotBytes streams a snapshot of s into memory.
func snapshotBytes(t testing.TB, s *FSMStore) []byte {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer sn.Release()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return buf.Bytes()
}

// TestSnapshotRoundTripEveryTable: random contents of every table survive
// snapshot -> restore into a store that held other state.
func TestSnapshotRoundTripEveryTable(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src, dst := openFSM(t, vfs.NewMem()), openFSM(t, vfs.NewMem())
		defer src.Close()
		defer dst.Close()
		b := src.NewBatch()
		genBatch(rt, b)
		index := rapid.Uint64Range(1, 1<<40).Draw(rt, "index")
		if err := b.Commit(index, rapid.Uint64().Draw(rt, "term")); err != nil {
			rt.Fatalf("Commit: %v", err)
		}
		stale := dst.NewBatch()
		genBatch(rt, stale)
		if err := stale.Commit(7, 1); err != nil {
			rt.Fatalf("Commit: %v", err)
		}
		if err := dst.Restore(bytes.NewReader(snapshotBytes(t, src))); err != nil {
			rt.Fatalf("Restore: %v", err)
		}
		if want, got := dump(t, src), dump(t, dst); !reflect.DeepEqual(want, got) {
			rt.Fatalf("restored state differs:\nwant %+v\n got %+v", want, got)
		}
	})
}

// fixture returns a store with a few rows in every table at index 42.
func fixture(t *testing.T, fs vfs.FS) *FSMStore {
	s := openFSM(t, fs)
	commit(t, s, 42, func(b *Batch) {
		b.PutOwner(1, 0, 0xABCDEF, 3)
		b.PutOwner(2, 1, 0x123456, 1)
		b.PutCursor(1, 0, 77)
		b.PutWorker(1, []byte("card"))
		b.PutSession(Session{Key: "s1", Worker: 1, DC: "dc1", Fence: 40, Active: true})
		b.PutEngineBlock(1, 0, 0x77, 0xABCDEF)
		b.PutRequest(9, "req-9", []byte("ok"))
	})
	return s
}

func TestRestoreRejectsCorruptStream(t *testing.T) {
	fs := vfs.NewMem()
	live := fixture(t, fs)
	good := snapshotBytes(t, live)
	commit(t, live, 43, func(b *Batch) { b.PutCursor(5, 5, 5) }) // live state now differs from good.
	before := dump(t, live)
	type tc struct {
		name   string
		stream []byte
		want   error
	}
	var tests []tc
	for i := 0; i < len(good); i++ {
		flipped := slices.Clone(good)
		flipped[i] ^= 0x20
		tests = append(tests, tc{name: "flip byte", stream: flipped, want: ErrCorrupt})
	}
	for _, n := range []int{0, 5, snapHeaderLen, snapHeaderLen + 3, len(good) / 2, len(good) - 9, len(good) - 1} {
		tests = append(tests, tc{name: "truncated", stream: good[:n], want: ErrCorrupt})
	}
	tests = append(tests,
		tc{name: "trailing byte", stream: append(slices.Clone(good), 0), want: ErrCorrupt},
		tc{name: "newer version", stream: withVersion(good, snapVersion+1), want: ErrUnsupported})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := live.Restore(bytes.NewReader(tc.stream)); !errors.Is(err, tc.want) {
				t.Fatalf("Restore: err = %v, want %v", err, tc.want)
			}
			if after := dump(t, live); !reflect.DeepEqual(before, after) {
				t.Fatalf("live state changed by a failed restore")
			}
		})
	}
	assertOneGeneration(t, fs)
}

// withVersion rewrites a stream's header version and header checksum.
func withVersion(stream []byte, v uint32) []byte {
	out := slices.Clone(stream)
	binary.BigEndian.PutUint32(out[8:], v)
	binary.BigEndian.PutUint64(out[snapHeaderLen-8:], xxh3.Hash(out[:snapHeaderLen-8]))
	return out
}

// assertOneGeneration checks that failed or finished restores left no
// generation directory besides the live one.
func assertOneGeneration(t *testing.T, fs vfs.FS) {
	t.Helper()
	names, err := fs.List("fsm")
	if err != nil {
		t.Fatal(err)
	}
	var gens int
	for _, n := range names {
		if _, err := parseGenName(n); err == nil {
			gens++
		}
	}
	if gens != 1 {
		t.Fatalf("fsm directory holds %v, want exactly one generation", names)
	}
}

func TestRestoreSurvivesReopenAndKeepsOpenSnapshots(t *testing.T) {
	fs := vfs.NewMem()
	src := fixture(t, vfs.NewMem())
	want := dump(t, src)
	s, err := OpenFSM(memOpts(fs, "fsm"))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, 3, func(b *Batch) { b.PutWorker(9, []byte("old")) })
	old, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	stale := s.NewBatch()
	if err := s.Restore(bytes.NewReader(snapshotBytes(t, src))); err != nil {
		t.Fatal(err)
	}
	stale.PutCursor(1, 1, 1)
	if err := stale.Commit(100, 1); !errors.Is(err, ErrStaleBatch) {
		t.Fatalf("batch from before the restore: err = %v, want ErrStaleBatch", err)
	}
	var buf bytes.Buffer // the pre-restore snapshot still streams its own view.
	if _, err := old.WriteTo(&buf); err != nil || old.Index() != 3 {
		t.Fatalf("old snapshot after restore: index %d, %v", old.Index(), err)
	}
	old.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := openFSM(t, fs)
	if got := dump(t, again); !reflect.DeepEqual(want, got) {
		t.Fatalf("after reopen: %+v, want %+v", got, want)
	}
	assertOneGeneration(t, fs)
}

func TestSnapshotPersistToRaftSink(t *testing.T) {
	s := fixture(t, vfs.NewMem())
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	store := raft.NewInmemSnapshotStore()
	sink, err := store.Create(raft.SnapshotVersionMax, sn.Index(), sn.Term(), raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sn.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	meta, rc, err := store.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	stream, _ := io.ReadAll(rc)
	if meta.Index != 42 || !bytes.Equal(stream, snapshotBytes(t, s)) {
		t.Fatalf("sink holds index %d and %d bytes", meta.Index, len(stream))
	}
}
