package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func thresholdRows(t *testing.T, s *FSMStore) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.ScanThresholds(func(r Threshold) error { out[r.Model] = string(r.Value); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestThresholdsTableRoundTrip(t *testing.T) {
	src, dst := openFSM(t, vfs.NewMem()), openFSM(t, vfs.NewMem())
	defer src.Close()
	defer dst.Close()
	commit(t, src, 5, func(b *Batch) {
		b.PutThreshold("m", []byte("v1"))
		b.PutThreshold("org/model-8b", []byte("v2"))
	})
	commit(t, src, 6, func(b *Batch) { b.DeleteThreshold("m") })
	if got := thresholdRows(t, src); len(got) != 1 || got["org/model-8b"] != "v2" {
		t.Fatalf("rows %v", got)
	}
	if err := dst.Restore(bytes.NewReader(snapshotBytes(t, src))); err != nil {
		t.Fatal(err)
	}
	if got := thresholdRows(t, dst); len(got) != 1 || got["org/model-8b"] != "v2" {
		t.Fatalf("restored rows %v", got)
	}
}

func TestThresholdsRefuseBadModel(t *testing.T) {
	s := openFSM(t, vfs.NewMem())
	defer s.Close()
	b := s.NewBatch()
	b.PutThreshold("", []byte("v"))
	if err := b.Commit(1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
}
