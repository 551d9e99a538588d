package consensus

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"github.com/zeebo/xxh3"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/failpoint"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Restore implements raft.FSM. The whole stream is read and its checksum
// verified before anything changes, so a malformed snapshot leaves the
// FSM as it was (and returns an error wrapping ErrBadSnapshot). A restore
// also clears a halt: the snapshot comes from a healthy node.
func (f *FSM) Restore(rc io.ReadCloser) error {
	return f.restore(rc, false, nil)
}

// restore is Restore; with skipOld a snapshot that a durable state
// already covers is read, verified and ignored instead of refused. meta,
// when known, supplies the term of a stream that does not record it.
func (f *FSM) restore(rc io.ReadCloser, skipOld bool, meta *raft.SnapshotMeta) error {
	defer rc.Close()
	hdr, recs, err := readSnapshot(rc)
	if err != nil {
		if f.metrics != nil {
			f.metrics.Storage.Corruption("snapshot", "snapshot")
		}
		return err
	}
	// The failpoints bracket the swap outside the lock, so that readers
	// held at them see the state before or after it.
	failpoint.Inject(failpoint.RestoreBeforeSwap)
	defer failpoint.Inject(failpoint.RestoreAfterSwap)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkRestoreIndex(hdr.AppliedIndex); err != nil {
		if skipOld {
			return nil
		}
		return err
	}
	f.load(recs)
	f.refreshThresholds()
	f.refreshIncumbents()
	f.applied, f.term = hdr.AppliedIndex, snapshotTerm(hdr, meta)
	f.watch.reset(f.applied) // Ownership change stream: watchers below the snapshot start over.
	f.halted.Store(nil)
	f.commitDurable(f.term)
	f.published.Store(f.applied)
	return nil
}

// snapshotTerm is the term of a snapshot's last applied entry: the
// stream's own, or for a stream written before it recorded one, raft's
// metadata when it describes the same index (raft's snapshot index also
// counts entries the FSM never sees, whose term may be later). 0 when
// neither knows.
func snapshotTerm(hdr *kvrpb.RaftSnapshotHeader, meta *raft.SnapshotMeta) uint64 {
	if hdr.AppliedTerm != 0 || meta == nil || meta.Index != hdr.AppliedIndex {
		return hdr.AppliedTerm
	}
	return meta.Term
}

// readSnapshot parses and verifies a snapshot stream.
func readSnapshot(r io.Reader) (*kvrpb.RaftSnapshotHeader, []*kvrpb.RaftSnapshotRecord, error) {
	var recs []*kvrpb.RaftSnapshotRecord
	err := scanStream(r, func(body []byte) error {
		rec := &kvrpb.RaftSnapshotRecord{}
		recs = append(recs, rec)
		return proto.Unmarshal(body, rec)
	})
	if err != nil {
		return nil, nil, err
	}
	if len(recs) == 0 || recs[0].GetHeader() == nil || recs[0].GetHeader().Format != snapshotFormat {
		return nil, nil, fmt.Errorf("%w: missing or unknown header", ErrBadSnapshot)
	}
	return recs[0].GetHeader(), recs[1:], nil
}

// scanStream reads the length-prefixed records of a snapshot stream up to
// its zero-length terminator, handing each body to fn (nil skips them),
// and compares the XXH3-64 trailer with what it read.
func scanStream(r io.Reader, fn func(body []byte) error) error {
	tr := &teeByteReader{r: bufio.NewReader(r), h: xxh3.New()}
	for i := 0; ; i++ {
		n, err := binary.ReadUvarint(tr)
		if err == nil && n == 0 {
			break
		}
		if err == nil {
			err = readBody(tr, n, fn)
		}
		if err != nil {
			return fmt.Errorf("%w: record %d: %w", ErrBadSnapshot, i, err)
		}
	}
	want := tr.h.Sum64()
	var sum [8]byte
	if _, err := io.ReadFull(tr.r, sum[:]); err != nil {
		return fmt.Errorf("%w: checksum: %w", ErrBadSnapshot, err)
	}
	if binary.LittleEndian.Uint64(sum[:]) != want {
		return fmt.Errorf("%w: checksum mismatch", ErrBadSnapshot)
	}
	return nil
}

// readBody reads a record body of n bytes and hands it to fn, or skips it
// when fn is nil.
func readBody(r io.Reader, n uint64, fn func(body []byte) error) error {
	if n > maxRecordBytes {
		return fmt.Errorf("record of %d bytes", n)
	}
	if fn == nil {
		_, err := io.CopyN(io.Discard, r, int64(n))
		return err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	return fn(body)
}

// teeByteReader hashes what it reads.
type teeByteReader struct {
	r *bufio.Reader
	h *xxh3.Hasher
}

func (t *teeByteReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	_, _ = t.h.Write(p[:n])
	return n, err
}

func (t *teeByteReader) ReadByte() (byte, error) {
	b, err := t.r.ReadByte()
	if err == nil {
		_, _ = t.h.Write([]byte{b})
	}
	return b, err
}

var errUnknownRecord = errors.New("unknown snapshot record")

// load replaces the tables and the index with recs. Callers hold mu.
func (f *FSM) load(recs []*kvrpb.RaftSnapshotRecord) {
	f.st.Ranks(func(w routing.Worker, _ uint64) bool { f.idx.RemoveWorker(w); return true })
	f.st.Reset()
	for _, rec := range recs {
		switch r := rec.Record.(type) {
		case *kvrpb.RaftSnapshotRecord_Binding:
			f.st.PutSession(r.Binding)
		case *kvrpb.RaftSnapshotRecord_Worker:
			f.st.PutWorker(r.Worker)
		case *kvrpb.RaftSnapshotRecord_Rank:
			f.loadRank(r.Rank)
		case *kvrpb.RaftSnapshotRecord_Request:
			f.st.RememberRequest(r.Request.RequestId, r.Request.Result, RememberedRequests)
		case *kvrpb.RaftSnapshotRecord_Thresholds:
			f.st.PutThreshold(r.Thresholds)
		case *kvrpb.RaftSnapshotRecord_Incumbent:
			f.st.PutIncumbent(r.Incumbent)
		default:
			f.log.Warn("skipping snapshot record", "err", errUnknownRecord)
		}
	}
}

// loadRank restores one rank into the tables and the index. The index
// gets one single-block root event per (block, tier): a root block's
// sequence hash is its local hash, so the sequence hash is carried as the
// local hash and the index ends up with exactly the same pairs.
func (f *FSM) loadRank(rs *kvrpb.RaftRankState) {
	w := routing.Worker{ID: routing.WorkerID(rs.EngineId), Rank: rs.Rank}
	f.st.SetCursor(w, rs.Cursor)
	var events []routing.Event
	var arena []routing.StoredBlock
	for _, o := range rs.Blocks {
		eh, seq := routing.EngineHash(o.EngineHash), routing.SeqHash(o.SeqHash)
		f.st.PutBlock(w, eh, seq)
		f.st.SetTiers(w, seq, uint8(o.Tiers))
		events, arena = appendRootEvents(events, arena, w, eh, seq, uint8(o.Tiers))
	}
	if err := f.idx.ReplaceWorker(w, events, rs.Cursor); err != nil {
		f.log.Warn("rebuilding the index from a snapshot", "worker", w.String(), "err", err)
	}
}

// appendRootEvents appends one single-block root event per tier bit of a
// block to events, carving each event's one block from arena (a rebuild of a million blocks then allocates a few
// large slices instead of a million small ones).
func appendRootEvents(events []routing.Event, arena []routing.StoredBlock, w routing.Worker,
	eh routing.EngineHash, seq routing.SeqHash, tiers uint8) ([]routing.Event, []routing.StoredBlock) {
	for t := routing.Tier(0); t < routing.NumTiers; t++ {
		if tiers&(1<<t) != 0 {
			if len(arena) == cap(arena) {
				arena = make([]routing.StoredBlock, 0, 4096)
			}
			arena = append(arena, routing.StoredBlock{Engine: eh, Local: routing.LocalHash(seq)})
			events = append(events, routing.Event{
				Worker: w, Kind: routing.EventStored, Tier: t, Blocks: arena[len(arena)-1 : len(arena) : len(arena)],
			})
		}
	}
	return events, arena
}
