package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/zeebo/xxh3"
)

func incumbentRows(t *testing.T, s *FSMStore) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.ScanIncumbents(func(r Incumbent) error { out[r.Set] = string(r.Value); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// asV3 rewrites a current stream as version 3: without the incumbents
// table's trailer count.
func asV3(stream []byte) []byte {
	out := withVersion(stream, snapVersionV3)
	extra := 8 * (len(snapTables) - snapTablesV3)
	body := slices.Clone(out[:len(out)-8-extra])
	return binary.BigEndian.AppendUint64(body, xxh3.Hash(body))
}

func TestIncumbentsTableRoundTrip(t *testing.T) {
	src, dst := openFSM(t, vfs.NewMem()), openFSM(t, vfs.NewMem())
	defer src.Close()
	defer dst.Close()
	commit(t, src, 5, func(b *Batch) {
		b.PutIncumbent("a\x00set", []byte("c1"))
		b.PutIncumbent("b\x00set", []byte("c2"))
	})
	commit(t, src, 6, func(b *Batch) { b.DeleteIncumbent("a\x00set") })
	if got := incumbentRows(t, src); len(got) != 1 || got["b\x00set"] != "c2" {
		t.Fatalf("rows %v", got)
	}
	if err := dst.Restore(bytes.NewReader(snapshotBytes(t, src))); err != nil {
		t.Fatal(err)
	}
	if got := incumbentRows(t, dst); len(got) != 1 || got["b\x00set"] != "c2" {
		t.Fatalf("restored rows %v", got)
	}
}

func TestRestoreReadsVersion3(t *testing.T) {
	src := openFSM(t, vfs.NewMem())
	defer src.Close()
	commit(t, src, 7, func(b *Batch) { b.PutThreshold("m", []byte("v")) })
	withRow := openFSM(t, vfs.NewMem())
	defer withRow.Close()
	commit(t, withRow, 7, func(b *Batch) { b.PutIncumbent("k", []byte("v")) })
	tests := []struct {
		name    string
		stream  []byte
		wantErr error
	}{
		{name: "version 3 stream", stream: asV3(snapshotBytes(t, src))},
		{name: "incumbent row in a version 3 stream", stream: asV3(snapshotBytes(t, withRow)), wantErr: ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := openFSM(t, vfs.NewMem())
			defer dst.Close()
			if err := dst.Restore(bytes.NewReader(tc.stream)); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Restore: err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && thresholdRows(t, dst)["m"] != "v" {
				t.Fatalf("rows %v", thresholdRows(t, dst))
			}
		})
	}
}

func TestIncumbentsRefuseBadKey(t *testing.T) {
	s := openFSM(t, vfs.NewMem())
	defer s.Close()
	b := s.NewBatch()
	b.PutIncumbent("", []byte("v"))
	if err := b.Commit(1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
}
