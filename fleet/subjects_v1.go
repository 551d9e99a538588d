package fleet

import "github.com/kvrouter/kvrouter/proto/kvrpb"

// subscribeV1 also subscribes to protocol version 1's shared worker
// subjects, unless Config.RefuseV1Subjects: engines of the previous
// release publish their cards, heartbeats and deregistrations there, and
// a router that ignored them would see no engine (and never turn ready)
// until every engine is upgraded. Messages on these subjects name their
// engine only in the payload, so fromItself cannot match them to a
// subject; that check adds nothing where it matters anyway: only NATS
// permissions (kvrpb.EnginePublish) confine an engine to its own
// subjects, and they do not allow the shared ones.
func (p *Plane) subscribeV1() error {
	if p.cfg.RefuseV1Subjects {
		return nil
	}
	dc := p.cfg.DC
	if err := p.sub(kvrpb.SubjectHeartbeatV1(dc), "heartbeat", heartbeatBacklog, p.onHeartbeat); err != nil {
		return err
	}
	if err := p.sub(kvrpb.SubjectRegisterV1(dc), "card", cardBacklog, p.onCard); err != nil {
		return err
	}
	return p.sub(kvrpb.SubjectDeregisterV1(dc), "deregister", cardBacklog, p.onDeregister)
}

// v1Subject reports whether a message came on a version 1 shared subject
// this plane accepts.
func (p *Plane) v1Subject(subject string) bool {
	return !p.cfg.RefuseV1Subjects && kvrpb.IsV1WorkerSubject(p.cfg.DC, subject)
}
