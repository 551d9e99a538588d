package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// requestRows collects every remembered request in FIFO order.
func requestRows(t testing.TB, s *FSMStore) []Request {
	t.Helper()
	var out []Request
	if err := s.ScanRequests(func(r Request) error { out = append(out, r); return nil }); err != nil {
		t.Fatalf("ScanRequests: %v", err)
	}
	return out
}

// requestIDs returns the ids of rows in order.
func requestIDs(rows []Request) []string {
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestRequestsFIFOAndLookup(t *testing.T) {
	s := openFSM(t, vfs.NewMem())
	// Ids sort opposite to insertion, so FIFO order must come from seq.
	commit(t, s, 1, func(b *Batch) {
		b.PutRequest(1, "zulu", []byte("r1"))
		b.PutRequest(2, "yankee", nil)
	})
	commit(t, s, 2, func(b *Batch) { b.PutRequest(300, "alpha", []byte("r3")) })
	if got := requestIDs(requestRows(t, s)); !reflect.DeepEqual(got, []string{"zulu", "yankee", "alpha"}) {
		t.Fatalf("FIFO order = %q", got)
	}
	r, err := s.Request("alpha")
	if err != nil || r.Seq != 300 || string(r.Result) != "r3" {
		t.Fatalf("Request(alpha) = %+v, %v", r, err)
	}
	if r, err := s.Request("yankee"); err != nil || r.Seq != 2 || len(r.Result) != 0 {
		t.Fatalf("Request(yankee) = %+v, %v", r, err)
	}
	if _, err := s.Request("nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Request(nobody): err = %v, want ErrNotFound", err)
	}
	oldest, err1 := s.OldestRequest()
	newest, err2 := s.NewestRequest()
	if err := errors.Join(err1, err2); err != nil || oldest.ID != "zulu" || newest.Seq != 300 {
		t.Fatalf("oldest %+v newest %+v: %v", oldest, newest, err)
	}
}

func TestRequestEvictOldest(t *testing.T) {
	const max = 3
	s := openFSM(t, vfs.NewMem())
	ids := []string{"a", "b", "c", "d", "e"}
	for i, id := range ids {
		seq := uint64(i + 1)
		b := s.NewBatch()
		b.PutRequest(seq, id, []byte(id))
		if i >= max {
			old, err := s.OldestRequest()
			if err != nil {
				t.Fatal(err)
			}
			b.DeleteRequest(old.Seq, old.ID)
		}
		if err := b.Commit(seq, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := requestIDs(requestRows(t, s)); !reflect.DeepEqual(got, []string{"c", "d", "e"}) {
		t.Fatalf("after eviction = %q, want c d e", got)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Request(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("evicted %q: err = %v, want ErrNotFound", id, err)
		}
	}
}

func TestRequestEmptyTable(t *testing.T) {
	s := openFSM(t, vfs.NewMem())
	_, e1 := s.OldestRequest()
	_, e2 := s.NewestRequest()
	_, e3 := s.Request("x")
	for i, err := range []error{e1, e2, e3} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("lookup %d on empty table: err = %v, want ErrNotFound", i, err)
		}
	}
}

func TestRequestRejects(t *testing.T) {
	s := openFSM(t, vfs.NewMem())
	tests := []struct {
		name   string
		id     string
		result []byte
		want   error
	}{
		{name: "empty id", id: "", want: ErrInvalidArgument},
		{name: "long id", id: strings.Repeat("i", MaxRequestIDBytes+1), want: ErrInvalidArgument},
		{name: "huge result", id: "x", result: make([]byte, MaxRequestResultBytes+1), want: ErrInvalidArgument},
		{name: "largest allowed", id: strings.Repeat("i", MaxRequestIDBytes), result: make([]byte, MaxRequestResultBytes)},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := s.NewBatch()
			b.PutRequest(uint64(i+1), tc.id, tc.result)
			if err := b.Commit(uint64(i+1), 1); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			_, err := s.Request(tc.id)
			if found := err == nil; found != (tc.want == nil) {
				t.Fatalf("Request after commit: %v", err)
			}
		})
	}
}

func TestRequestCodecCorrupt(t *testing.T) {
	good := encodeRequest(&Request{ID: "id", Result: []byte("res")})
	key := requestSeqKey(4)
	tests := []struct {
		name string
		k, v []byte
	}{
		{name: "short key", k: key[:5], v: good},
		{name: "empty value", k: key, v: nil},
		{name: "bad version", k: key, v: append([]byte{9}, good[1:]...)},
		{name: "truncated", k: key, v: good[:len(good)-1]},
		{name: "trailing", k: key, v: append(append([]byte{}, good...), 0)},
		{name: "empty id", k: key, v: encodeRequest(&Request{Result: []byte("r")})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeRequest(tc.k, tc.v); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
	if r, err := decodeRequest(key, good); err != nil || r.Seq != 4 || r.ID != "id" || string(r.Result) != "res" {
		t.Fatalf("good row = %+v, %v", r, err)
	}
}
