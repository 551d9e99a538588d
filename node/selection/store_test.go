package selection

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/kvrouter/kvrouter/node/dispatch"
)

// TestSelectionsAreBoundedAndTakenOnce: a kept selection is taken once,
// and leaves at its TTL or when the byte bound needs its room, oldest
// first.
func TestSelectionsAreBoundedAndTakenOnce(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ss := newSelections(time.Minute, 10, 3*(4*100+256))
	r := &dispatch.Request{ID: "r", Model: "m", Tokens: make([]uint32, 100)}
	ids := make([]string, 4)
	for i := range ids {
		ids[i] = ss.put(r, pins{worker: dispatch.Pin{Engine: 1}}, true, t0)
	}
	if _, ok := ss.take(ids[0], t0); ok {
		t.Error("the oldest selection outlived the byte bound")
	}
	e, ok := ss.take(ids[1], t0)
	if !ok || len(e.req.Tokens) != 100 || e.worker.Engine != 1 {
		t.Fatalf("take: %+v %v", e, ok)
	}
	if _, ok := ss.take(ids[1], t0); ok {
		t.Error("a selection was taken twice")
	}
	if _, ok := ss.take(ids[2], t0.Add(time.Minute)); ok {
		t.Error("a selection outlived its TTL")
	}
}

// TestSelectionsCopyOnlyLentTokens: a selection keeps a prompt it owns
// as it is, and copies one lent from the parser's pool, which the pool
// reuses once the call ends.
func TestSelectionsCopyOnlyLentTokens(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ss := newSelections(time.Minute, 10, 1<<20)
	for _, lent := range []bool{false, true} {
		r := &dispatch.Request{ID: "r", Model: "m", Tokens: []uint32{1, 2, 3}}
		e, _ := ss.take(ss.put(r, pins{}, lent, t0), t0)
		r.Tokens[0] = 9 // the owner's next use of its memory
		if kept := e.req.Tokens[0]; kept != map[bool]uint32{false: 9, true: 1}[lent] {
			t.Errorf("lent=%v: the kept prompt starts with %d", lent, kept)
		}
	}
}

// TestCodeOfEveryClass: each error class of the edge's table has the gRPC
// code its status means.
func TestSelectCodeOfEveryClass(t *testing.T) {
	table := errorTable(529)
	tests := []struct {
		err  error
		want codes.Code
	}{
		{dispatch.ErrBadRequest, codes.InvalidArgument},
		{dispatch.ErrModelNotFound, codes.NotFound},
		{dispatch.ErrOverloaded, codes.ResourceExhausted},
		{dispatch.ErrNoEngine, codes.Unavailable},
		{dispatch.ErrSessionLimit, codes.ResourceExhausted},
		{ErrSelectionNotFound, codes.NotFound},
		{ErrReservationLimit, codes.ResourceExhausted},
		{ErrClosed, codes.Unavailable},
	}
	for _, tc := range tests {
		if got := Code(table.Classify(tc.err)); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
	if c := table.Classify(ErrSelectionNotFound); c.Status != http.StatusNotFound {
		t.Errorf("selection not found is %d", c.Status)
	}
}
