package store

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// engineRows collects every engine block row.
func engineRows(t testing.TB, s *FSMStore) []EngineBlock {
	t.Helper()
	var out []EngineBlock
	if err := s.ScanEngineBlocks(func(e EngineBlock) error { out = append(out, e); return nil }); err != nil {
		t.Fatalf("ScanEngineBlocks: %v", err)
	}
	return out
}

// engineFixture maps three ids on rank (7, 1), one on (7, 2), one on (8, 0).
func engineFixture(t *testing.T) *FSMStore {
	s := openFSM(t, vfs.NewMem())
	commit(t, s, 1, func(b *Batch) {
		b.PutEngineBlock(7, 1, 0xB0, 0x10)
		b.PutEngineBlock(7, 1, 0xA0, 0x11)
		b.PutEngineBlock(7, 1, 0xC0, 0x12)
		b.PutEngineBlock(7, 2, 0xA0, 0x20)
		b.PutEngineBlock(8, 0, 0xA0, 0x30)
	})
	return s
}

func TestEngineBlocksPointAndScan(t *testing.T) {
	s := engineFixture(t)
	commit(t, s, 2, func(b *Batch) { b.PutEngineBlock(7, 1, 0xA0, 0x99) }) // replaces.
	if seq, err := s.EngineBlock(7, 1, 0xA0); err != nil || seq != 0x99 {
		t.Fatalf("EngineBlock(7,1,A0) = %x, %v; want 99", seq, err)
	}
	if seq, err := s.EngineBlock(7, 2, 0xA0); err != nil || seq != 0x20 {
		t.Fatalf("EngineBlock(7,2,A0) = %x, %v; want 20", seq, err)
	}
	if _, err := s.EngineBlock(7, 3, 0xA0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("EngineBlock of absent rank: err = %v, want ErrNotFound", err)
	}
	var ofRank []EngineBlock
	if err := s.ScanEngineBlocksOfRank(7, 1, func(e EngineBlock) error { ofRank = append(ofRank, e); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []EngineBlock{{7, 1, 0xA0, 0x99}, {7, 1, 0xB0, 0x10}, {7, 1, 0xC0, 0x12}}
	if !reflect.DeepEqual(ofRank, want) {
		t.Fatalf("ScanEngineBlocksOfRank = %+v, want %+v (engine hash order)", ofRank, want)
	}
	if all := engineRows(t, s); len(all) != 5 || all[4] != (EngineBlock{8, 0, 0xA0, 0x30}) {
		t.Fatalf("ScanEngineBlocks = %+v", all)
	}
}

func TestEngineBlockDeletes(t *testing.T) {
	tests := []struct {
		name string
		del  func(b *Batch)
		want []EngineBlock
	}{
		{name: "one id", del: func(b *Batch) { b.DeleteEngineBlock(7, 1, 0xB0) },
			want: []EngineBlock{{7, 1, 0xA0, 0x11}, {7, 1, 0xC0, 0x12}, {7, 2, 0xA0, 0x20}, {8, 0, 0xA0, 0x30}}},
		{name: "absent id", del: func(b *Batch) { b.DeleteEngineBlock(7, 1, 0xD0) },
			want: []EngineBlock{{7, 1, 0xA0, 0x11}, {7, 1, 0xB0, 0x10}, {7, 1, 0xC0, 0x12}, {7, 2, 0xA0, 0x20}, {8, 0, 0xA0, 0x30}}},
		{name: "rank", del: func(b *Batch) { b.DeleteEngineBlocksOfRank(7, 1) },
			want: []EngineBlock{{7, 2, 0xA0, 0x20}, {8, 0, 0xA0, 0x30}}},
		{name: "worker", del: func(b *Batch) { b.DeleteEngineBlocksOfWorker(7) },
			want: []EngineBlock{{8, 0, 0xA0, 0x30}}},
		{name: "put after rank delete in one batch", del: func(b *Batch) {
			b.DeleteEngineBlocksOfRank(8, 0)
			b.PutEngineBlock(8, 0, 0xE0, 0x31)
		}, want: []EngineBlock{{7, 1, 0xA0, 0x11}, {7, 1, 0xB0, 0x10}, {7, 1, 0xC0, 0x12}, {7, 2, 0xA0, 0x20}, {8, 0, 0xE0, 0x31}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := engineFixture(t)
			commit(t, s, 2, tc.del)
			if got := engineRows(t, s); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("rows = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEngineBlocksCoexistWithOwners(t *testing.T) {
	s := engineFixture(t)
	commit(t, s, 2, func(b *Batch) {
		b.PutOwner(7, 1, 0xB0, 1)
		b.DeleteEngineBlocksOfWorker(7)
	})
	if m, err := s.Owner(7, 1, 0xB0); err != nil || m != 1 {
		t.Fatalf("engine block range delete touched owners: %v, %v", m, err)
	}
	commit(t, s, 3, func(b *Batch) { b.DeleteOwnersOfWorker(8) })
	if seq, err := s.EngineBlock(8, 0, 0xA0); err != nil || seq != 0x30 {
		t.Fatalf("owner range delete touched engine blocks: %x, %v", seq, err)
	}
}
