package store

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FuzzRestore feeds arbitrary streams to Restore: it must never panic, and
// a rejected stream must leave the live state as it was.
func FuzzRestore(f *testing.F) {
	src := openFSM(f, vfs.NewMem())
	commit(f, src, 9, func(b *Batch) {
		b.PutOwner(1, 0, 2, 1)
		b.PutCursor(1, 0, 3)
		b.PutWorker(1, []byte("c"))
		b.PutSession(Session{Key: "k", DC: "d"})
	})
	f.Add(asV1(snapshotBytes(f, src)))
	commit(f, src, 10, func(b *Batch) {
		b.PutEngineBlock(1, 0, 4, 2)
		b.PutRequest(5, "r", []byte("x"))
	})
	f.Add(snapshotBytes(f, src))
	f.Add([]byte{})
	live := openFSM(f, vfs.NewMem())
	commit(f, live, 1, func(b *Batch) { b.PutCursor(7, 7, 7) })
	f.Fuzz(func(t *testing.T, stream []byte) {
		before := dump(t, live)
		err := live.Restore(bytes.NewReader(stream))
		if err == nil {
			return // A valid stream legitimately replaced the state.
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Restore: unexpected error class: %v", err)
		}
		if after := dump(t, live); !reflect.DeepEqual(before, after) {
			t.Fatal("a rejected stream changed the live state")
		}
	})
}
