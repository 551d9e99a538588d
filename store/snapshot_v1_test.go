package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/zeebo/xxh3"
)

// asV1 rewrites a current stream as version 1: the header version, and a
// trailer without the counts of the tables version 2 added, with the
// stream checksum recomputed. Records are left alone, so a stream holding
// rows of the new tables becomes an invalid version 1 stream.
func asV1(stream []byte) []byte {
	out := withVersion(stream, snapVersionV1)
	extra := 8 * (len(snapTables) - snapTablesV1)
	body := slices.Clone(out[:len(out)-8-extra])
	return binary.BigEndian.AppendUint64(body, xxh3.Hash(body))
}

func TestRestoreReadsVersion1(t *testing.T) {
	src := openFSM(t, vfs.NewMem())
	commit(t, src, 42, func(b *Batch) {
		b.PutOwner(1, 0, 0xABCDEF, 3)
		b.PutCursor(1, 0, 77)
		b.PutWorker(1, []byte("card"))
		b.PutSession(Session{Key: "s1", Worker: 1, DC: "dc1", Fence: 40, Active: true})
	})
	want := dump(t, src)
	withNew := fixture(t, vfs.NewMem())
	tests := []struct {
		name    string
		stream  []byte
		wantErr error
	}{
		{name: "old tables only", stream: asV1(snapshotBytes(t, src))},
		{name: "new table record in v1", stream: asV1(snapshotBytes(t, withNew)), wantErr: ErrCorrupt},
		{name: "v1 version with v2 trailer", stream: withVersion(snapshotBytes(t, src), snapVersionV1), wantErr: ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := openFSM(t, vfs.NewMem())
			commit(t, dst, 3, func(b *Batch) {
				b.PutEngineBlock(5, 5, 5, 5)
				b.PutRequest(1, "stale", nil)
			})
			before := dump(t, dst)
			err := dst.Restore(bytes.NewReader(tc.stream))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Restore: err = %v, want %v", err, tc.wantErr)
			}
			expect := want
			if tc.wantErr != nil {
				expect = before // a failed restore leaves the live state alone.
			}
			if got := dump(t, dst); !reflect.DeepEqual(expect, got) {
				t.Fatalf("state after restore:\n got %+v\nwant %+v", got, expect)
			}
		})
	}
}
