package consensus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/store"
)

// TestCheckLog: a whole log passes; a hole, or a log that ends below the
// applied index and the newest snapshot, is corruption.
func TestCheckLog(t *testing.T) {
	tests := []struct {
		name           string
		entries        []uint64
		snapshot       uint64
		applied        uint64
		corrupt        bool
		wantErrMention string
	}{
		{name: "empty", applied: 0},
		{name: "whole", entries: []uint64{1, 2, 3}, applied: 3},
		{name: "applied covered by a snapshot", entries: []uint64{5, 6}, snapshot: 9, applied: 9},
		{name: "hole", entries: []uint64{1, 2, 4}, applied: 2, corrupt: true, wantErrMention: "missing"},
		{name: "ends below applied", entries: []uint64{1, 2}, applied: 5, corrupt: true, wantErrMention: "before the applied index"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := raft.NewInmemStore()
			for _, i := range tc.entries {
				if err := s.StoreLog(&raft.Log{Index: i, Term: 1}); err != nil {
					t.Fatal(err)
				}
			}
			err := CheckLog(s, stableStub{}, tc.snapshot, tc.applied)
			if got := IsCorrupt(err); got != tc.corrupt || (err != nil) != tc.corrupt {
				t.Fatalf("CheckLog = %v, corrupt %v; want corrupt %v", err, got, tc.corrupt)
			}
			if tc.corrupt && !strings.Contains(err.Error(), tc.wantErrMention) {
				t.Fatalf("error %q does not say %q", err, tc.wantErrMention)
			}
		})
	}
}

// stableStub is a fresh stable store: every key is "not found".
type stableStub struct{}

func (stableStub) Set([]byte, []byte) error         { return nil }
func (stableStub) Get([]byte) ([]byte, error)       { return nil, errors.New("not found") }
func (stableStub) SetUint64([]byte, uint64) error   { return nil }
func (stableStub) GetUint64([]byte) (uint64, error) { return 0, errors.New("not found") }

// TestCheckLogStableError: a stable key that cannot be read is reported.
func TestCheckLogStableError(t *testing.T) {
	err := CheckLog(raft.NewInmemStore(), badStable{}, 0, 0)
	if !IsCorrupt(err) {
		t.Fatalf("CheckLog = %v, want corruption", err)
	}
}

type badStable struct{ stableStub }

func (badStable) GetUint64([]byte) (uint64, error) { return 0, store.ErrCorrupt }

// TestSetAside: the named entries move, whole, into one corrupt-<time>
// directory; absent ones are skipped; nothing else moves.
func TestSetAside(t *testing.T) {
	fs := vfs.NewMem()
	for _, d := range []string{"data/raft", "data/fsm", "data/keep"} {
		if err := fs.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := fs.Create("data/raft/000001.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	now := time.Date(2026, 12, 3, 13, 40, 5, 0, time.UTC)
	aside, err := SetAside(fs, "data", []string{"raft", "fsm", "snapshots"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if aside != "data/corrupt-20261203T134005.000Z" {
		t.Fatalf("set aside in %q", aside)
	}
	for _, p := range []string{aside + "/raft/000001.log", aside + "/fsm", "data/keep"} {
		if _, err := fs.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"data/raft", "data/fsm"} {
		if _, err := fs.Stat(p); err == nil {
			t.Errorf("%s still in place", p)
		}
	}
}
