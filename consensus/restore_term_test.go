package consensus

import (
	"bytes"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// termFSM returns an in-memory FSM that applied binds 1..n at term.
func termFSM(t *testing.T, n, term uint64) *FSM {
	t.Helper()
	f := NewFSM(nil, nil, nil)
	for i := uint64(1); i <= n; i++ {
		data, err := Encode(bindCmd("k"+string(rune('a'+i)), i, 0, t0, ""))
		if err != nil {
			t.Fatal(err)
		}
		f.Apply(&raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data})
	}
	return f
}

func TestRestoreRecordsSnapshotTerm(t *testing.T) {
	src := termFSM(t, 10, 7)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	f, st, _ := openStoreFSM(t, vfs.NewMem(), "fsm")
	if err := f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if _, term, err := st.s.Applied(); err != nil || term != 7 || st.AppliedTerm() != 7 {
		t.Fatalf("store term %d (state %d), err %v; want 7", term, st.AppliedTerm(), err)
	}
}

func TestRestoreNewerTakesTermFromMetadata(t *testing.T) {
	src := termFSM(t, 10, 3)
	tests := []struct {
		name      string
		metaIndex uint64
		want      uint64
	}{
		{"metadata at the stream's index", 10, 5},
		{"metadata past the stream's index", 12, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snaps := raft.NewInmemSnapshotStore()
			sink, err := snaps.Create(raft.SnapshotVersionMax, tc.metaIndex, 5, raft.Configuration{}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			// A stream written before the header recorded its term.
			old := &fsmSnapshot{applied: 10, recs: tables(src)}
			if err := old.Persist(sink); err != nil {
				t.Fatal(err)
			}
			f, st, _ := openStoreFSM(t, vfs.NewMem(), "fsm")
			if err := f.restoreNewer(snaps); err != nil {
				t.Fatal(err)
			}
			if _, term, _ := st.s.Applied(); term != tc.want || st.Applied() != 10 {
				t.Fatalf("store at %d term %d, want 10 term %d", st.Applied(), term, tc.want)
			}
		})
	}
}
