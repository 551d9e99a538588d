package kvrpb

import (
	"errors"
	"fmt"
	"strings"
)

// Version is the event-plane protocol version this package describes.
const Version = 1

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

// SubjectRegister is where engines publish their WorkerCard.
func SubjectRegister(dc string) string { return "kvr." + dc + ".workers.register" }

// SubjectHeartbeat is where engines publish their Heartbeat.
func SubjectHeartbeat(dc string) string { return "kvr." + dc + ".workers.heartbeat" }

// SubjectDeregister is where engines announce a clean shutdown.
func SubjectDeregister(dc string) string { return "kvr." + dc + ".workers.deregister" }

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
