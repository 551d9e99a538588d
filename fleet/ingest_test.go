package fleet

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// handleBatch decodes and applies one KVEventBatch payload, as
// Plane.onBatch and the applier do between them.
func (g *ingester) handleBatch(data []byte) {
	w, inc, events, err := wire.DecodeBatch(data)
	g.handleDecoded(w, inc, events, err)
}

// ingestRig drives an ingester directly, with a recording fetch in place
// of NATS requests.
type ingestRig struct {
	t       *testing.T
	idx     *index.Exact
	ing     *ingester
	ctr     *counters
	fetches []snapshotResult
}

var w1 = routing.Worker{ID: 1}

func newIngestRig(t *testing.T, maxBuf int) *ingestRig {
	r := &ingestRig{t: t, idx: index.NewExact(), ctr: newCounters(nil)}
	reg := NewRegistry(time.Second, nil)
	card := &kvrpb.WorkerCard{EngineId: 1, DpSize: 1, Model: "m", BlockSize: 4, TotalKvBlocks: 8,
		MaxNumBatchedTokens: 8, EndpointUrl: "http://h:1", Checksum: "c", Incarnation: 1}
	if _, err := reg.Register(card, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	r.ing = newIngester(r.idx, reg, r.ctr, slog.New(slog.DiscardHandler), maxBuf, func(w routing.Worker, gen uint64) {
		r.fetches = append(r.fetches, snapshotResult{w: w, gen: gen})
	})
	return r
}

// stored is a parentless one-block stored event whose block is named by
// its id, so each event adds one pair.
func stored(id uint64) routing.Event {
	return routing.Event{Worker: w1, ID: id, Kind: routing.EventStored,
		Blocks: []routing.StoredBlock{{Engine: routing.EngineHash(id), Local: routing.LocalHash(id)}}}
}

// batch publishes events first..last of w1 through the byte entry point.
func (r *ingestRig) batch(first, last uint64) {
	var evs []routing.Event
	for id := first; id <= last; id++ {
		evs = append(evs, stored(id))
	}
	data, err := proto.Marshal(wire.EncodeBatch(w1, 1, evs))
	if err != nil {
		r.t.Fatal(err)
	}
	r.ing.handleBatch(data)
}

// answer answers the latest fetch with a snapshot holding blocks 1..last.
func (r *ingestRig) answer(last uint64, err error) {
	f := r.fetches[len(r.fetches)-1]
	f.last, f.err = last, err
	for id := uint64(1); id <= last; id++ {
		ev := stored(id)
		ev.ID = 0
		f.events = append(f.events, ev)
	}
	r.ing.applySnapshot(f)
}

func (r *ingestRig) expect(cursor uint64, pairs, fetches int) {
	r.t.Helper()
	cur, _ := r.idx.Cursor(w1)
	if cur != cursor || r.idx.Stats().Pairs != pairs || len(r.fetches) != fetches {
		r.t.Fatalf("cursor %d pairs %d fetches %d, want %d %d %d", cur, r.idx.Stats().Pairs, len(r.fetches), cursor, pairs, fetches)
	}
}

func TestIngestGapBuffersAndDrains(t *testing.T) {
	r := newIngestRig(t, 100)
	r.ing.reset(1, 1)
	r.batch(1, 2) // buffered behind the initial snapshot
	r.expect(0, 0, 1)
	r.answer(0, nil)
	r.expect(2, 2, 1)
	r.batch(3, 3)
	r.batch(5, 6) // gap: one fetch
	r.batch(7, 8) // buffered, no second fetch
	r.expect(3, 3, 2)
	stale := r.fetches[0]
	r.ing.applySnapshot(stale) // an answer to an earlier resync is discarded
	r.expect(3, 3, 2)
	r.answer(5, nil) // covers 1..5: 5 is skipped, 6..8 drain
	r.expect(8, 8, 2)
	if s := r.ctr.stats(); s.Gaps != 1 || s.Resyncs != 2 || s.Applied != 6 {
		t.Fatalf("stats %+v", s)
	}
}

func TestIngestDrainFindsNewGap(t *testing.T) {
	r := newIngestRig(t, 100)
	r.ing.reset(1, 1)
	r.batch(4, 4)
	r.answer(2, nil) // the snapshot stops at 2; buffered 4 leaves a gap
	r.expect(2, 2, 2)
	r.answer(4, nil)
	r.expect(4, 4, 2)
}

func TestIngestFailedResyncRetriesOnNextGap(t *testing.T) {
	r := newIngestRig(t, 100)
	r.ing.reset(1, 1)
	r.batch(3, 4)
	r.answer(0, errors.New("timeout"))
	r.expect(0, 0, 1)
	if s := r.ctr.stats(); s.ResyncErrors != 1 || s.Dropped != 2 {
		t.Fatalf("stats %+v", s)
	}
	r.batch(5, 5)
	r.expect(0, 0, 2)
	r.answer(5, nil)
	r.expect(5, 5, 2)
}

func TestIngestBufferOverflow(t *testing.T) {
	r := newIngestRig(t, 2)
	r.ing.reset(1, 1)
	r.batch(1, 3)
	if s := r.ctr.stats(); s.Dropped != 3 {
		t.Fatalf("stats %+v", s)
	}
	r.answer(0, nil)
	r.expect(0, 0, 1)
	r.batch(4, 4) // the dropped events leave a gap
	r.expect(0, 0, 2)
}

func TestIngestTailCheck(t *testing.T) {
	r := newIngestRig(t, 100)
	r.ing.reset(1, 1)
	r.answer(0, nil)
	r.batch(1, 3)
	r.ing.tail(w1, 5) // 4 and 5 may still be in flight
	r.expect(3, 3, 1)
	r.ing.tail(w1, 5) // a period later they are not: lost
	r.expect(3, 3, 2)
	r.ing.tail(w1, 5) // resyncing: no second request
	r.expect(3, 3, 2)
}

func TestIngestDropsUnregistered(t *testing.T) {
	tests := []struct {
		name string
		w    routing.Worker
		inc  uint64
	}{
		{"unknown engine", routing.Worker{ID: 2}, 1},
		{"old incarnation", w1, 0},
		{"rank beyond card", routing.Worker{ID: 1, Rank: 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newIngestRig(t, 100)
			ev := stored(1)
			ev.Worker = tc.w
			r.ing.handleDecoded(tc.w, tc.inc, []routing.Event{ev}, nil)
			if s := r.ctr.stats(); s.Dropped != 1 || r.idx.Stats().Workers != 0 {
				t.Fatalf("stats %+v, index %+v", s, r.idx.Stats())
			}
		})
	}
}

func TestIngestRemoveDiscardsResync(t *testing.T) {
	r := newIngestRig(t, 100)
	r.ing.reset(1, 1)
	r.ing.remove(1)
	r.answer(3, nil)
	r.expect(0, 0, 1)
	if _, ok := r.idx.Cursor(w1); ok {
		t.Fatal("answer for a removed engine applied")
	}
}

func FuzzHandleBatch(f *testing.F) {
	for _, evs := range [][]routing.Event{{stored(1)}, {stored(2), stored(3)}} {
		data, _ := proto.Marshal(wire.EncodeBatch(w1, 1, evs))
		f.Add(data)
	}
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newIngestRig(t, 4)
		r.ing.handleBatch(data)
		r.ing.handleBatch(data)
		s := r.ctr.stats()
		if s.Malformed > 0 && (s.Applied > 0 || r.idx.Stats().Pairs > 0) {
			t.Fatalf("malformed batch changed the index: %+v", s)
		}
	})
}
