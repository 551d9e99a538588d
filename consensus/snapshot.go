package consensus

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/raft"
	"github.com/zeebo/xxh3"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/failpoint"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// snapshotFormat is the snapshot stream's format number (header record).
const snapshotFormat = 1

// maxRecordBytes bounds one snapshot record, so a corrupt length cannot
// make Restore allocate without limit.
const maxRecordBytes = 64 << 20

// records returns the canonical encoding of the tables: bindings by key,
// workers by engine id, ranks by worker with blocks by engine id, request
// ids oldest first. Callers hold mu (read or write).
func (f *FSM) records() []*kvrpb.RaftSnapshotRecord {
	var out []*kvrpb.RaftSnapshotRecord
	for _, b := range sortedRows(f.st.Sessions, func(b *kvrpb.RaftBinding) string { return b.Key }) {
		out = append(out, &kvrpb.RaftSnapshotRecord{Record: &kvrpb.RaftSnapshotRecord_Binding{Binding: b}})
	}
	for _, w := range sortedRows(f.st.Workers, func(r *kvrpb.RaftWorkerRecord) uint64 { return r.GetCard().GetEngineId() }) {
		out = append(out, &kvrpb.RaftSnapshotRecord{Record: &kvrpb.RaftSnapshotRecord_Worker{Worker: w}})
	}
	out = append(out, f.rankRecords()...)
	for _, t := range sortedRows(f.st.Thresholds, func(t *kvrpb.RaftThresholds) string { return t.Model }) {
		out = append(out, &kvrpb.RaftSnapshotRecord{Record: &kvrpb.RaftSnapshotRecord_Thresholds{Thresholds: t}})
	}
	for _, r := range sortedRows(f.st.Incumbents, incumbentKeyOf) {
		out = append(out, &kvrpb.RaftSnapshotRecord{Record: &kvrpb.RaftSnapshotRecord_Incumbent{Incumbent: r}})
	}
	f.st.Requests(func(id string, r *kvrpb.RaftResult) bool {
		rec := &kvrpb.RaftRequestRecord{RequestId: id, Result: proto.CloneOf(r)}
		out = append(out, &kvrpb.RaftSnapshotRecord{Record: &kvrpb.RaftSnapshotRecord_Request{Request: rec}})
		return true
	})
	return out
}

// sortedRows returns copies of the rows of one table (each lists them),
// sorted by key.
func sortedRows[M proto.Message, K cmp.Ordered](each func(func(M) bool), key func(M) K) []M {
	var rows []M
	each(func(m M) bool { rows = append(rows, proto.CloneOf(m)); return true })
	slices.SortFunc(rows, func(a, b M) int { return cmp.Compare(key(a), key(b)) })
	return rows
}

// rankRecords encodes every rank's cursor and blocks, sorted.
func (f *FSM) rankRecords() []*kvrpb.RaftSnapshotRecord {
	var ranks []routing.Worker
	cursors := map[routing.Worker]uint64{}
	f.st.Ranks(func(w routing.Worker, c uint64) bool { ranks = append(ranks, w); cursors[w] = c; return true })
	slices.SortFunc(ranks, routing.Worker.Compare)
	out := make([]*kvrpb.RaftSnapshotRecord, 0, len(ranks))
	for _, w := range ranks {
		rs := &kvrpb.RaftRankState{EngineId: uint64(w.ID), Rank: w.Rank, Cursor: cursors[w]}
		f.st.Blocks(w, func(eh routing.EngineHash, seq routing.SeqHash) bool {
			rs.Blocks = append(rs.Blocks, &kvrpb.RaftOwned{
				EngineHash: uint64(eh), SeqHash: uint64(seq), Tiers: uint32(f.st.Tiers(w, seq)),
			})
			return true
		})
		slices.SortFunc(rs.Blocks, func(a, b *kvrpb.RaftOwned) int { return cmp.Compare(a.EngineHash, b.EngineHash) })
		out = append(out, &kvrpb.RaftSnapshotRecord{Record: &kvrpb.RaftSnapshotRecord_Rank{Rank: rs}})
	}
	return out
}

// writeRecord writes one length-prefixed, deterministically marshalled
// record.
func writeRecord(w io.Writer, r *kvrpb.RaftSnapshotRecord, buf []byte) ([]byte, error) {
	body, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(buf[:0], r)
	if err != nil {
		return body, err
	}
	var lb [binary.MaxVarintLen64]byte
	if _, err := w.Write(lb[:binary.PutUvarint(lb[:], uint64(len(body)))]); err != nil {
		return body, err
	}
	_, err = w.Write(body)
	return body, err
}

// StateHash returns the applied index and an XXH3-64 of the canonical
// encoding of every table (the snapshot records without the header). Two
// nodes of the same build at the same applied index must report the same
// hash; tests and the chaos checker compare them.
func (f *FSM) StateHash() (uint64, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h := xxh3.New()
	var buf []byte
	for _, r := range f.records() {
		buf, _ = writeRecord(h, r, buf)
	}
	return f.applied, h.Sum64()
}

// fsmSnapshot is a point-in-time copy of the tables.
type fsmSnapshot struct {
	applied, term uint64
	recs          []*kvrpb.RaftSnapshotRecord
}

// Snapshot implements raft.FSM. It copies the tables (raft does not call
// it concurrently with Apply), so Persist can run beside later applies.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if err := f.Halted(); err != nil {
		return nil, err
	}
	return &fsmSnapshot{applied: f.applied, term: f.term, recs: f.records()}, nil
}

// Persist implements raft.FSMSnapshot: header, records, a zero length,
// then the XXH3-64 of everything before it.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	failpoint.Inject(failpoint.SnapshotBeforePersist)
	defer failpoint.Inject(failpoint.SnapshotAfterPersist)
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("consensus: persisting snapshot: %w", err)
	}
	return sink.Close()
}

// write encodes the stream to w.
func (s *fsmSnapshot) write(w io.Writer) error {
	h := xxh3.New()
	bw := bufio.NewWriter(io.MultiWriter(w, h))
	hdr := &kvrpb.RaftSnapshotRecord{Record: &kvrpb.RaftSnapshotRecord_Header{
		Header: &kvrpb.RaftSnapshotHeader{Format: snapshotFormat, AppliedIndex: s.applied, AppliedTerm: s.term},
	}}
	buf, err := writeRecord(bw, hdr, nil)
	for _, r := range s.recs {
		if err != nil {
			return err
		}
		buf, err = writeRecord(bw, r, buf)
	}
	if err != nil {
		return err
	}
	if err := bw.WriteByte(0); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = w.Write(binary.LittleEndian.AppendUint64(nil, h.Sum64()))
	return err
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}
