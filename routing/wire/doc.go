// Package wire converts between the routing vocabulary (routing.Event,
// routing.WorkerInfo, routing.Load) and the event-plane wire messages of
// proto/kvrpb. It is the one place where untrusted bytes from NATS become
// routing values, so every decoder validates what it returns: tiers and
// kinds are known, sizes are bounded, event ids are contiguous within a
// batch. Decoders return errors wrapping ErrMalformed and never panic.
//
// Concurrency: the functions are pure and safe for concurrent use.
package wire
