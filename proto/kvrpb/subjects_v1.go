package kvrpb

// Protocol version 1 published registrations, heartbeats and
// deregistrations on one shared subject per message type, with the engine
// id only in the payload. Engines of that version keep publishing there
// until they are upgraded, so routers still subscribe to these subjects
// during a rolling upgrade (see docs/operations.md, "Rolling upgrade").

// SubjectRegisterV1 is protocol version 1's registration subject.
func SubjectRegisterV1(dc string) string { return "kvr." + dc + ".workers.register" }

// SubjectHeartbeatV1 is protocol version 1's heartbeat subject.
func SubjectHeartbeatV1(dc string) string { return "kvr." + dc + ".workers.heartbeat" }

// SubjectDeregisterV1 is protocol version 1's deregistration subject.
func SubjectDeregisterV1(dc string) string { return "kvr." + dc + ".workers.deregister" }

// IsV1WorkerSubject reports whether subject is one of dc's protocol
// version 1 worker subjects, which name no engine.
func IsV1WorkerSubject(dc, subject string) bool {
	return subject == SubjectRegisterV1(dc) || subject == SubjectHeartbeatV1(dc) || subject == SubjectDeregisterV1(dc)
}
