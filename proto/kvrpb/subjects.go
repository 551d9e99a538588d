package kvrpb

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is the event-plane protocol version this package describes.
//
// Version 2 moved registrations, heartbeats and deregistrations from
// shared subjects to per-engine ones (kvr.<dc>.workers.<engine_id>.…).
const Version = 2

// ErrSubject is returned for a DC name that cannot be a NATS subject token.
var ErrSubject = errors.New("kvrpb: invalid subject token")

// ValidDC reports whether dc can stand in a subject: non-empty, at most 64
// bytes, and free of the characters NATS gives meaning to.
func ValidDC(dc string) error {
	if dc == "" || len(dc) > 64 || strings.ContainsAny(dc, ".*> \t\r\n") {
		return fmt.Errorf("%w: dc %q", ErrSubject, dc)
	}
	return nil
}

// The registration subjects carry the engine's id, like its KV and snapshot
// subjects, so that a NATS server can confine each engine's credentials to
// its own subjects (EnginePublish, EngineSubscribe) and a router can refuse
// a payload that names another engine than its subject (EngineOf).

// SubjectRegister is where engine publishes its WorkerCard.
func SubjectRegister(dc string, engine uint64) string { return workerSubject(dc, engine, "register") }

// SubjectHeartbeat is where engine publishes its Heartbeat.
func SubjectHeartbeat(dc string, engine uint64) string { return workerSubject(dc, engine, "heartbeat") }

// SubjectDeregister is where engine announces a clean shutdown.
func SubjectDeregister(dc string, engine uint64) string {
	return workerSubject(dc, engine, "deregister")
}

// SubjectRegisterAll, SubjectHeartbeatAll and SubjectDeregisterAll match
// the subject of every engine of a DC.
func SubjectRegisterAll(dc string) string { return "kvr." + dc + ".workers.*.register" }

// SubjectHeartbeatAll matches every engine's heartbeat subject.
func SubjectHeartbeatAll(dc string) string { return "kvr." + dc + ".workers.*.heartbeat" }

// SubjectDeregisterAll matches every engine's deregistration subject.
func SubjectDeregisterAll(dc string) string { return "kvr." + dc + ".workers.*.deregister" }

func workerSubject(dc string, engine uint64, kind string) string {
	return "kvr." + dc + ".workers." + strconv.FormatUint(engine, 10) + "." + kind
}

// SubjectDiscover is where a router node that starts asks every engine of
// the DC to publish its WorkerCard now (the payload is empty), so that it
// learns the fleet within one round trip instead of one card interval.
func SubjectDiscover(dc string) string { return "kvr." + dc + ".discover" }

// SubjectKV is where one rank publishes its KVEventBatch stream.
func SubjectKV(dc string, engine uint64, rank uint32) string {
	return fmt.Sprintf("kvr.%s.kv.%d.%d", dc, engine, rank)
}

// SubjectKVAll matches every rank's event stream of a DC.
func SubjectKVAll(dc string) string { return "kvr." + dc + ".kv.>" }

// SubjectSnapshot is where one rank answers SnapshotRequests.
func SubjectSnapshot(dc string, engine uint64, rank uint32) string {
	return fmt.Sprintf("kvr.%s.snapshot.%d.%d", dc, engine, rank)
}

// EngineOf returns the engine id a per-engine subject of dc names (the
// fourth token of kvr.<dc>.workers.<id>.…, kvr.<dc>.kv.<id>.<rank> and
// kvr.<dc>.snapshot.<id>.<rank>), or ErrSubject.
func EngineOf(dc, subject string) (uint64, error) {
	rest, ok := strings.CutPrefix(subject, "kvr."+dc+".")
	if !ok {
		return 0, fmt.Errorf("%w: %q is not under kvr.%s", ErrSubject, subject, dc)
	}
	parts := strings.SplitN(rest, ".", 3)
	if len(parts) < 3 {
		return 0, fmt.Errorf("%w: %q names no engine", ErrSubject, subject)
	}
	id, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: %q names no engine", ErrSubject, subject)
	}
	return id, nil
}

// EnginePublish lists the subjects an engine's credentials may publish on:
// its own registration and KV subjects. (Snapshot replies go to the
// requester's inbox, which a NATS server allows as a response.)
func EnginePublish(dc string, engine uint64) []string {
	id := strconv.FormatUint(engine, 10)
	return []string{"kvr." + dc + ".workers." + id + ".>", "kvr." + dc + ".kv." + id + ".>"}
}

// EngineSubscribe lists the subjects an engine's credentials may subscribe
// to: its own snapshot requests and the routers' discovery requests.
func EngineSubscribe(dc string, engine uint64) []string {
	return []string{"kvr." + dc + ".snapshot." + strconv.FormatUint(engine, 10) + ".>", SubjectDiscover(dc)}
}
