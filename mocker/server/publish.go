package server

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// buildCard describes the engine for routers. The checksum hashes the
// card's content without the checksum and the incarnation, so a restart
// with the same shape keeps its checksum while the incarnation tells the
// restart apart.
func (s *Server) buildCard() *kvrpb.WorkerCard {
	e := &s.cfg.Engine
	c := &kvrpb.WorkerCard{
		EngineId: s.cfg.EngineID, DpSize: uint32(s.cfg.DPSize), Model: e.Model,
		BlockSize: uint32(e.BlockSize), TotalKvBlocks: uint64(e.NumBlocks),
		MaxNumBatchedTokens: uint32(e.MaxNumBatchedTokens), Device: kvrpb.DeviceKind_DEVICE_KIND_GPU,
		EndpointUrl: s.cfg.EndpointURL, Version: kvrpb.Version,
		BootstrapPort: uint32(s.cfg.BootstrapPort), TransferDomain: s.cfg.TransferDomain,
	}
	if r := s.cfg.role(); r != routing.RoleAggregated {
		c.WorkerType = r.String()
	}
	data, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	sum := sha256.Sum256(data)
	c.Checksum = hex.EncodeToString(sum[:16])
	c.Incarnation = s.incarnation
	return c
}

// publish marshals and sends msg on subject. Failures are logged, not
// returned: the event plane tolerates lost messages (heartbeats repeat,
// event gaps are repaired by snapshots), and a mocker keeps serving.
func (s *Server) publish(subject string, msg proto.Message) {
	data, err := proto.Marshal(msg)
	if err == nil {
		err = s.nc.Publish(subject, data)
	}
	if err != nil {
		s.log.Warn("publish failed", "subject", subject, "err", err)
	}
}

func (s *Server) publishCard() {
	s.publish(kvrpb.SubjectRegister(s.cfg.DC, s.cfg.EngineID), s.card.Load())
}

// publishHeartbeat reports every rank's load, unless heartbeats are paused.
func (s *Server) publishHeartbeat() {
	if s.hbPaused.Load() {
		return
	}
	hb := &kvrpb.Heartbeat{
		EngineId: s.cfg.EngineID, CardChecksum: s.card.Load().GetChecksum(), Incarnation: s.incarnation,
		UnixNanos: s.cfg.Clock().UnixNano(), Loads: make([]*kvrpb.RankLoad, len(s.ranks)),
	}
	for i, r := range s.ranks {
		l, last := r.load()
		hb.Loads[i] = &kvrpb.RankLoad{
			Rank: r.worker.Rank, Waiting: uint32(l.Waiting), Running: uint32(l.Running),
			KvUsedBlocks: uint64(l.KVUsedBlocks), KvTotalBlocks: uint64(l.KVTotalBlocks),
			ActivePrefillTokens: uint64(max(l.ActivePrefillTokens, 0)),
			ActiveDecodeBlocks:  uint64(max(l.ActiveDecodeBlocks, 0)), LastEventId: last,
		}
	}
	s.publish(kvrpb.SubjectHeartbeat(s.cfg.DC, s.cfg.EngineID), hb)
}

func (s *Server) publishDeregister() {
	s.publish(kvrpb.SubjectDeregister(s.cfg.DC, s.cfg.EngineID), &kvrpb.Deregister{EngineId: s.cfg.EngineID, Incarnation: s.incarnation})
	if err := s.nc.Flush(); err != nil {
		s.log.Warn("flush after deregister failed", "err", err)
	}
}

// publishEvents sends the events of one Advance as one batch (split only
// when it exceeds the wire limits), or drops the whole Advance's events
// when the test hook asks for it. The caller holds r.mu.
func (s *Server) publishEvents(r *rank, events []routing.Event) {
	if len(events) == 0 {
		return
	}
	if s.vllm() {
		s.publishVLLM(r, events)
		return
	}
	if r.drop.Load() > 0 {
		r.drop.Add(-1)
		s.log.Info("dropping event batch", "worker", r.worker.String(), "first", events[0].ID, "last", events[len(events)-1].ID)
		return
	}
	subject := kvrpb.SubjectKV(s.cfg.DC, s.cfg.EngineID, r.worker.Rank)
	for len(events) > 0 {
		n := min(len(events), wire.MaxEventsPerBatch)
		s.publishBatch(subject, r.worker, events[:n])
		events = events[n:]
	}
}

// publishBatch sends events as one batch, halving it until it fits the
// server's maximum payload. An event too large alone is logged and lost;
// the consumer sees the gap and resynchronises from a snapshot.
func (s *Server) publishBatch(subject string, w routing.Worker, events []routing.Event) {
	data, err := proto.Marshal(wire.EncodeBatch(w, s.incarnation, events))
	if err != nil {
		s.log.Error("encode event batch", "worker", w.String(), "err", err)
		return
	}
	if int64(len(data)) > s.nc.MaxPayload() {
		if len(events) == 1 {
			s.log.Error("event exceeds max payload", "worker", w.String(), "event", events[0].ID, "bytes", len(data))
			return
		}
		half := len(events) / 2
		s.publishBatch(subject, w, events[:half])
		s.publishBatch(subject, w, events[half:])
		return
	}
	if err := s.nc.Publish(subject, data); err != nil {
		s.log.Warn("publish event batch", "worker", w.String(), "err", err)
	}
}

// snapshotReply answers a SnapshotRequest for rank r from the engine's
// Dump. The caller holds r.mu, so no event batch is published between the
// dump and the reply.
func (s *Server) snapshotReply(r *rank, req []byte) *kvrpb.SnapshotReply {
	reply := &kvrpb.SnapshotReply{EngineId: s.cfg.EngineID, Rank: r.worker.Rank, Incarnation: s.incarnation}
	var in kvrpb.SnapshotRequest
	switch err := proto.Unmarshal(req, &in); {
	case err != nil:
		reply.Error = "malformed snapshot request: " + err.Error()
	case in.EngineId != 0 && in.EngineId != s.cfg.EngineID, in.Rank != r.worker.Rank:
		reply.Error = "snapshot request names another engine or rank"
	default:
		snap := r.eng.Dump()
		reply.LastEventId = snap.LastEventID
		reply.Events = make([]*kvrpb.KVEvent, len(snap.Events))
		for i := range snap.Events {
			reply.Events[i] = wire.EncodeEvent(&snap.Events[i])
		}
	}
	return reply
}

// answerSnapshot is the NATS handler of one rank's snapshot subject.
func (s *Server) answerSnapshot(r *rank, data []byte, respond func([]byte) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reply := s.snapshotReply(r, data)
	out, err := proto.Marshal(reply)
	if err == nil && int64(len(out)) > s.nc.MaxPayload() {
		reply = &kvrpb.SnapshotReply{EngineId: reply.EngineId, Rank: reply.Rank, Incarnation: reply.Incarnation,
			Error: "snapshot exceeds the maximum NATS payload"}
		out, err = proto.Marshal(reply)
	}
	if err == nil {
		err = respond(out)
	}
	if err != nil {
		s.log.Warn("snapshot reply failed", "worker", r.worker.String(), slog.Any("err", err))
	}
}
