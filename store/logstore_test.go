package store

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// mkLog builds an entry whose fields all derive from index.
func mkLog(index uint64) *raft.Log {
	return &raft.Log{
		Index:      index,
		Term:       index/10 + 1,
		Type:       raft.LogType(index % 6),
		Data:       []byte{byte(index), 'd'},
		Extensions: []byte{'x', byte(index)},
		AppendedAt: time.Unix(1700000000, int64(index)),
	}
}

// storeRange stores entries [lo, hi].
func storeRange(t *testing.T, s *LogStore, lo, hi uint64) {
	t.Helper()
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, mkLog(i))
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs: %v", err)
	}
}

// bounds returns FirstIndex and LastIndex or fails.
func bounds(t *testing.T, s *LogStore) (uint64, uint64) {
	t.Helper()
	first, err1 := s.FirstIndex()
	last, err2 := s.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("bounds: %v", err)
	}
	return first, last
}

func TestLogStoreDeleteRange(t *testing.T) {
	tests := []struct {
		name                string
		stored              [][2]uint64 // stored ranges, inclusive
		min, max            uint64
		wantFirst, wantLast uint64
	}{
		{name: "empty store", min: 1, max: 5},
		{name: "prefix", stored: [][2]uint64{{1, 10}}, min: 1, max: 4, wantFirst: 5, wantLast: 10},
		{name: "suffix", stored: [][2]uint64{{1, 10}}, min: 7, max: 10, wantFirst: 1, wantLast: 6},
		{name: "min greater than max is a no-op", stored: [][2]uint64{{1, 10}}, min: 8, max: 3, wantFirst: 1, wantLast: 10},
		{name: "max beyond last", stored: [][2]uint64{{1, 10}}, min: 5, max: 1000, wantFirst: 1, wantLast: 4},
		{name: "max is MaxUint64", stored: [][2]uint64{{1, 10}}, min: 0, max: math.MaxUint64},
		{name: "max is MaxUint64 keeps below min", stored: [][2]uint64{{1, 10}}, min: 3, max: math.MaxUint64, wantFirst: 1, wantLast: 2},
		{name: "gap survives", stored: [][2]uint64{{1, 5}, {20, 25}}, min: 1, max: 3, wantFirst: 4, wantLast: 25},
		{name: "delete across gap", stored: [][2]uint64{{1, 5}, {20, 25}}, min: 4, max: 21, wantFirst: 1, wantLast: 25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openLog(t, vfs.NewMem())
			for _, r := range tc.stored {
				storeRange(t, s, r[0], r[1])
			}
			if err := s.DeleteRange(tc.min, tc.max); err != nil {
				t.Fatalf("DeleteRange: %v", err)
			}
			if f, l := bounds(t, s); f != tc.wantFirst || l != tc.wantLast {
				t.Fatalf("first, last = %d, %d; want %d, %d", f, l, tc.wantFirst, tc.wantLast)
			}
		})
	}
}

func TestLogStoreGetLog(t *testing.T) {
	s := openLog(t, vfs.NewMem())
	storeRange(t, s, 1, 5)
	storeRange(t, s, 9, 9) // a gap at 6..8
	tests := []struct {
		name    string
		index   uint64
		wantErr error
	}{
		{name: "first", index: 1},
		{name: "last", index: 9},
		{name: "in gap", index: 7, wantErr: raft.ErrLogNotFound},
		{name: "zero", index: 0, wantErr: raft.ErrLogNotFound},
		{name: "beyond", index: 10, wantErr: raft.ErrLogNotFound},
		{name: "max", index: math.MaxUint64, wantErr: raft.ErrLogNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got raft.Log
			err := s.GetLog(tc.index, &got)
			if tc.wantErr != nil {
				if err != tc.wantErr {
					t.Fatalf("err = %v, want exactly %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetLog: %v", err)
			}
			assertLogEqual(t, &got, mkLog(tc.index))
		})
	}
	if f, l := bounds(t, s); f != 1 || l != 9 {
		t.Fatalf("first, last = %d, %d; want 1, 9 despite the gap", f, l)
	}
}

// assertLogEqual compares every field of two entries.
func assertLogEqual(t *testing.T, got, want *raft.Log) {
	t.Helper()
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
		!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
		!got.AppendedAt.Equal(want.AppendedAt) {
		t.Fatalf("log = %+v, want %+v", got, want)
	}
}

func TestLogStoreEmptyAndZeroTime(t *testing.T) {
	s := openLog(t, vfs.NewMem())
	if f, l := bounds(t, s); f != 0 || l != 0 {
		t.Fatalf("empty store first, last = %d, %d; want 0, 0", f, l)
	}
	in := &raft.Log{Index: 3, Term: 2, Type: raft.LogNoop}
	if err := s.StoreLog(in); err != nil {
		t.Fatal(err)
	}
	var out raft.Log
	if err := s.GetLog(3, &out); err != nil {
		t.Fatal(err)
	}
	if !out.AppendedAt.IsZero() || out.Data != nil || out.Extensions != nil {
		t.Fatalf("zero fields not preserved: %+v", out)
	}
}

func TestStableStore(t *testing.T) {
	s := openLog(t, vfs.NewMem())
	tests := []struct {
		name string
		run  func() error
	}{
		{name: "Get missing", run: func() error { _, err := s.Get([]byte("CurrentTerm")); return err }},
		{name: "GetUint64 missing", run: func() error { _, err := s.GetUint64([]byte("LastVoteTerm")); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err == nil || err.Error() != "not found" {
				t.Fatalf("err = %v, want text exactly \"not found\"", err)
			}
		})
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 42 {
		t.Fatalf("GetUint64 = %d, %v; want 42", v, err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-a")); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get([]byte("LastVoteCand"))
	if err != nil || string(v) != "node-a" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	v[0] = 'X' // the returned value is a copy; mutating it changes nothing.
	if again, _ := s.Get([]byte("LastVoteCand")); string(again) != "node-a" {
		t.Fatalf("stored value changed to %q through a returned slice", again)
	}
	if _, err := s.GetUint64([]byte("LastVoteCand")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetUint64 of a 6-byte value: err = %v, want ErrCorrupt", err)
	}
}

func TestLogStoreValuesCopied(t *testing.T) {
	s := openLog(t, vfs.NewMem())
	storeRange(t, s, 1, 2)
	var a, b raft.Log
	if err := errors.Join(s.GetLog(1, &a), s.GetLog(2, &b)); err != nil {
		t.Fatal(err)
	}
	a.Data[0] = 0xEE
	var again raft.Log
	if err := s.GetLog(1, &again); err != nil {
		t.Fatal(err)
	}
	assertLogEqual(t, &again, mkLog(1))
	assertLogEqual(t, &b, mkLog(2))
}

func TestLogStoreClosed(t *testing.T) {
	s, err := OpenLogStore(memOpts(vfs.NewMem(), "raft"))
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(s.Close(), s.Close()); err != nil {
		t.Fatalf("Close twice: %v", err)
	}
	var l raft.Log
	for name, err := range map[string]error{
		"GetLog":    s.GetLog(1, &l),
		"StoreLogs": s.StoreLogs([]*raft.Log{mkLog(1)}),
		"Set":       s.Set([]byte("k"), nil),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
}

func TestLogCodecCorrupt(t *testing.T) {
	good := encodeLog(nil, mkLog(7))
	tests := []struct {
		name string
		buf  []byte
	}{
		{name: "empty", buf: nil},
		{name: "short header", buf: good[:10]},
		{name: "bad version", buf: append([]byte{9}, good[1:]...)},
		{name: "truncated data", buf: good[:len(good)-3]},
		{name: "trailing bytes", buf: append(append([]byte{}, good...), 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l raft.Log
			if err := decodeLog(tc.buf, &l); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "no dir", opts: Options{}, want: "Options.Dir"},
		{name: "old format", opts: Options{Dir: "d", FormatMajorVersion: 3}, want: "Options.FormatMajorVersion"},
		{name: "tiny memtable", opts: Options{Dir: "d", MemTableBytes: 10}, want: "Options.MemTableBytes"},
		{name: "negative cache", opts: Options{Dir: "d", CacheBytes: -1}, want: "Options.CacheBytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.prepare()
			if !errors.Is(err, ErrInvalidOptions) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("err = %v, want ErrInvalidOptions naming %s", err, tc.want)
			}
		})
	}
	if o, err := (Options{Dir: "d"}).prepare(); err != nil || o.FormatMajorVersion != FormatPinned {
		t.Fatalf("defaults: %v, format %d", err, o.FormatMajorVersion)
	}
}
