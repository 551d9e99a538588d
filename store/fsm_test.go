package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// commit applies fill in one batch at index (term 1) and fails on error.
func commit(t testing.TB, s *FSMStore, index uint64, fill func(b *Batch)) {
	t.Helper()
	b := s.NewBatch()
	fill(b)
	if err := b.Commit(index, 1); err != nil {
		t.Fatalf("Commit(%d): %v", index, err)
	}
}

// owners collects every ownership row.
func owners(t testing.TB, s *FSMStore) []Owner {
	t.Helper()
	var out []Owner
	if err := s.ScanOwners(func(o Owner) error { out = append(out, o); return nil }); err != nil {
		t.Fatalf("ScanOwners: %v", err)
	}
	return out
}

func TestFSMTablesPointAndScan(t *testing.T) {
	s := openFSM(t, vfs.NewMem())
	sess := Session{Key: "sess-1", Worker: 7, Rank: 1, DC: "eu-1", Version: 3, Fence: 9,
		IdleDeadlineNanos: -5, Parent: "group-a", Active: true}
	commit(t, s, 5, func(b *Batch) {
		b.PutOwner(7, 1, 0xAA, 0b001)
		b.PutOwner(7, 1, 0xBB, 0b011)
		b.PutOwner(8, 0, 0xAA, 0b100)
		b.PutWorker(7, []byte("card-7"))
		b.PutCursor(7, 1, 1234)
		b.PutSession(sess)
	})
	if idx, term, err := s.Applied(); err != nil || idx != 5 || term != 1 {
		t.Fatalf("Applied = %d, %d, %v; want 5, 1", idx, term, err)
	}
	if m, err := s.Owner(7, 1, 0xBB); err != nil || m != 0b011 {
		t.Fatalf("Owner = %b, %v", m, err)
	}
	if c, err := s.Cursor(7, 1); err != nil || c != 1234 {
		t.Fatalf("Cursor = %d, %v", c, err)
	}
	if w, err := s.Worker(7); err != nil || string(w) != "card-7" {
		t.Fatalf("Worker = %q, %v", w, err)
	}
	if got, err := s.Session("sess-1"); err != nil || got != sess {
		t.Fatalf("Session = %+v, %v; want %+v", got, err, sess)
	}
	var ofRank []Owner
	_ = s.ScanOwnersOfRank(7, 1, func(o Owner) error { ofRank = append(ofRank, o); return nil })
	if len(ofRank) != 2 || ofRank[0].Hash != 0xAA || ofRank[1].Hash != 0xBB {
		t.Fatalf("ScanOwnersOfRank = %+v", ofRank)
	}
	if all := owners(t, s); len(all) != 3 {
		t.Fatalf("ScanOwners = %+v, want 3 rows", all)
	}
}

func TestFSMDeletes(t *testing.T) {
	s := openFSM(t, vfs.NewMem())
	commit(t, s, 1, func(b *Batch) {
		for h := uint64(0); h < 10; h++ {
			b.PutOwner(1, 0, h, 1)
			b.PutOwner(1, 1, h, 1)
			b.PutOwner(2, 0, h, 1)
		}
		b.PutWorker(1, []byte("c"))
		b.PutCursor(1, 0, 1)
		b.PutSession(Session{Key: "s"})
	})
	tests := []struct {
		name       string
		fill       func(b *Batch)
		wantOwners int
	}{
		{name: "one block", fill: func(b *Batch) { b.DeleteOwner(2, 0, 3) }, wantOwners: 29},
		{name: "one rank", fill: func(b *Batch) { b.DeleteOwnersOfRank(1, 0) }, wantOwners: 19},
		{name: "whole worker", fill: func(b *Batch) { b.DeleteOwnersOfWorker(1) }, wantOwners: 9},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			commit(t, s, uint64(i+2), tc.fill)
			if n := len(owners(t, s)); n != tc.wantOwners {
				t.Fatalf("owners = %d, want %d", n, tc.wantOwners)
			}
		})
	}
	commit(t, s, 10, func(b *Batch) { b.DeleteWorker(1); b.DeleteCursor(1, 0); b.DeleteSession("s") })
	_, e1 := s.Worker(1)
	_, e2 := s.Cursor(1, 0)
	_, e3 := s.Session("s")
	_, e4 := s.Owner(2, 0, 3)
	for i, err := range []error{e1, e2, e3, e4} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("lookup %d: err = %v, want ErrNotFound", i, err)
		}
	}
}

func TestFSMBatchRejects(t *testing.T) {
	s := openFSM(t, vfs.NewMem())
	commit(t, s, 10, func(b *Batch) {})
	tests := []struct {
		name  string
		index uint64
		fill  func(b *Batch)
		want  error
	}{
		{name: "empty tier mask", index: 11, fill: func(b *Batch) { b.PutOwner(1, 0, 1, 0) }, want: ErrInvalidArgument},
		{name: "empty session key", index: 11, fill: func(b *Batch) { b.PutSession(Session{}) }, want: ErrInvalidArgument},
		{name: "long session key", index: 11, fill: func(b *Batch) {
			b.PutSession(Session{Key: strings.Repeat("k", MaxSessionKeyBytes+1)})
		}, want: ErrInvalidArgument},
		{name: "huge card", index: 11, fill: func(b *Batch) { b.PutWorker(1, make([]byte, MaxCardBytes+1)) }, want: ErrInvalidArgument},
		{name: "same index", index: 10, fill: func(b *Batch) { b.PutCursor(1, 0, 1) }, want: ErrIndexRegressed},
		{name: "older index", index: 3, fill: func(b *Batch) { b.PutCursor(1, 0, 1) }, want: ErrIndexRegressed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := s.NewBatch()
			tc.fill(b)
			b.PutCursor(9, 9, 9) // valid writes in a rejected batch must not land.
			if err := b.Commit(tc.index, 1); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, err := s.Cursor(9, 9); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a rejected batch wrote: %v", err)
			}
			if idx, _, _ := s.Applied(); idx != 10 {
				t.Fatalf("applied moved to %d", idx)
			}
		})
	}
}

func TestFSMReopenKeepsState(t *testing.T) {
	fs := vfs.NewMem()
	s, err := OpenFSM(memOpts(fs, "fsm"))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, 4, func(b *Batch) {
		b.PutWorker(3, []byte("w3"))
		b.PutEngineBlock(3, 1, 0xE, 0x5)
		b.PutRequest(8, "r8", []byte("res"))
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Applied(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Applied after Close: %v", err)
	}
	if err := s.NewBatch().Commit(5, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close: %v", err)
	}
	s2 := openFSM(t, fs)
	if idx, _, _ := s2.Applied(); idx != 4 {
		t.Fatalf("applied after reopen = %d, want 4", idx)
	}
	if w, err := s2.Worker(3); err != nil || !bytes.Equal(w, []byte("w3")) {
		t.Fatalf("Worker after reopen = %q, %v", w, err)
	}
	if seq, err := s2.EngineBlock(3, 1, 0xE); err != nil || seq != 0x5 {
		t.Fatalf("EngineBlock after reopen = %x, %v", seq, err)
	}
	if r, err := s2.Request("r8"); err != nil || r.Seq != 8 || string(r.Result) != "res" {
		t.Fatalf("Request after reopen = %+v, %v", r, err)
	}
}

func TestSessionCodecCorrupt(t *testing.T) {
	good := encodeSession(&Session{Key: "k", DC: "dc", Parent: "p"})
	tests := []struct {
		name string
		buf  []byte
	}{
		{name: "short", buf: good[:10]},
		{name: "bad version", buf: append([]byte{7}, good[1:]...)},
		{name: "bad bool", buf: func() []byte { b := append([]byte{}, good...); b[37] = 2; return b }()},
		{name: "truncated strings", buf: good[:len(good)-1]},
		{name: "trailing", buf: append(append([]byte{}, good...), 'z')},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeSession("k", tc.buf); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}
