package oaiedge

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// forEachParser runs test with the vector token parser (where the
// processor has it) and with the portable one.
func forEachParser(t *testing.T, test func(t *testing.T)) {
	saved := useAVX2
	t.Cleanup(func() { useAVX2 = saved })
	for _, vector := range []bool{true, false} {
		name := map[bool]string{true: "avx2", false: "portable"}[vector]
		t.Run(name, func(t *testing.T) {
			if vector && !saved {
				t.Skip("no AVX2 on this processor")
			}
			useAVX2 = vector
			test(t)
		})
	}
}

// irregularIDs are array elements the vector parser must leave to the
// general loop: an empty element, spaces, leading zeros, a sign, a
// fraction, an exponent, eight or more digits, a non-number; and two
// plain ids at the edges of what it takes.
var irregularIDs = []string{"", " 7", "7 ", "00", "012", "-1", "1.5", "2e3", "12345678", "4294967295",
	"4294967296", "x", "\n3", "0", "9999999"}

// plainArrays draws a long array of plain ids and returns one body per
// irregular element, each placed at a random index, so that every kind is
// in every check the first irregular element the parsers meet.
func plainArrays(t *rapid.T) [][]byte {
	elems := rapid.SliceOfN(rapid.StringMatching(`[1-9][0-9]{0,6}|0`), 40, 400).Draw(t, "plain")
	bodies := make([][]byte, len(irregularIDs))
	for k, odd := range irregularIDs {
		at := rapid.IntRange(0, len(elems)-1).Draw(t, "at")
		saved := elems[at]
		elems[at] = odd
		bodies[k] = []byte(`{"model":"m","prompt":[` + strings.Join(elems, ",") + `]}`)
		elems[at] = saved
	}
	return bodies
}

// TestPlainRunFastContract calls the vector parser directly at every id
// start of long arrays, and checks its contract: it stops at s or just
// after a comma, the ids it returns are exactly the ids between, each a
// plain id, it honours the limit, and it writes nothing beyond the
// slice's capacity.
func TestPlainRunFastContract(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 on this processor")
	}
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.OneOf(rapid.IntRange(0, 300), rapid.Just(1<<20)).Draw(t, "limit")
		room := rapid.OneOf(rapid.IntRange(0, 300), rapid.Just(500)).Draw(t, "room")
		for _, b := range plainArrays(t) {
			checkFastRuns(t, b, limit, room)
		}
	})
}

// checkFastRuns runs the vector parser at every id start of b.
func checkFastRuns(t *rapid.T, b []byte, limit, room int) {
	for i := bytes.IndexByte(b, '[') + 1; i < len(b); i++ {
		if isDigit(b[i-1]) {
			continue
		}
		// A guard after the capacity catches writes past it.
		backing := make([]uint32, room+8)
		for k := range backing {
			backing[k] = 0xdeadbeef
		}
		got, next := plainRunFast(backing[:0:room], b, i, limit)
		for k := room; k < len(backing); k++ {
			if backing[k] != 0xdeadbeef {
				t.Fatalf("start %d: wrote slot %d past capacity %d", i, k, room)
			}
		}
		checkFastRun(t, b, i, next, got, limit)
	}
}

// TestParseLongArraysMatchesEncodingJSON parses long arrays with at most a
// few irregular elements, where the first irregular element alone decides
// whether the body is valid, and compares with encoding/json, for both
// parsers.
func TestParseLongArraysMatchesEncodingJSON(t *testing.T) {
	forEachParser(t, func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			for _, body := range plainArrays(t) {
				var want struct{ Prompt []uint32 }
				werr := json.Unmarshal(body, &want)
				p, err := completions(body, 1<<20, nil)
				if (err == nil) != (werr == nil) {
					t.Fatalf("%s: err %v, encoding/json %v", body, err, werr)
				}
				if err == nil {
					if !slices.Equal(p.Tokens, want.Prompt) {
						t.Fatalf("%s: tokens differ from encoding/json", body)
					}
				}
			}
		})
	})
}

// checkFastRun checks one plainRunFast result against a plain reading of
// b[i:next].
func checkFastRun(t *rapid.T, b []byte, i, next int, got []uint32, limit int) {
	if next == i {
		if len(got) != 0 {
			t.Fatalf("start %d: %d ids without progress", i, len(got))
		}
		return
	}
	if next < i || b[next-1] != ',' {
		t.Fatalf("start %d: stopped at %d, not after a comma", i, next)
	}
	want := strings.Split(string(b[i:next-1]), ",")
	if len(got) != len(want) || len(got) > limit {
		t.Fatalf("start %d: %d ids for %q (limit %d)", i, len(got), b[i:next], limit)
	}
	for k, w := range want {
		v, err := strconv.ParseUint(w, 10, 32)
		if err != nil || len(w) > 7 || (len(w) > 1 && w[0] == '0') || uint32(v) != got[k] {
			t.Fatalf("start %d: id %d is %d, text %q", i, k, got[k], w)
		}
	}
}
