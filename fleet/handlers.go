package fleet

import (
	"errors"
	"net/url"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// Refusal reasons of the kvrouter_fleet_messages_refused_total metric.
const (
	reasonIdentity = "identity"
	reasonDeclared = "declared"
	reasonCapacity = "capacity"
	reasonRate     = "rate"
	reasonOverflow = "overflow"
)

// reasonOf names an admission error, or "" for another error.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, ErrIdentity):
		return reasonIdentity
	case errors.Is(err, ErrDeclared):
		return reasonDeclared
	case errors.Is(err, ErrCapacity):
		return reasonCapacity
	case errors.Is(err, ErrRateLimited):
		return reasonRate
	}
	return ""
}

// onBatch runs on the KV subscription's goroutine: it decodes, so that
// decoding overlaps with the applier's index writes, and queues in
// arrival order. A batch for another engine than its subject's is
// refused.
func (p *Plane) onBatch(m *nats.Msg) {
	w, inc, events, err := wire.DecodeBatch(m.Data)
	if err == nil && !p.fromItself(m.Subject, uint64(w.ID), "kv") {
		return
	}
	p.post(item{kind: itemBatch, w: w, inc: inc, events: events, err: err})
}

// fromItself reports whether a message naming engine id was published on
// that engine's subject, and counts it refused otherwise.
func (p *Plane) fromItself(subject string, id uint64, message string) bool {
	if got, err := kvrpb.EngineOf(p.cfg.DC, subject); err == nil && got == id || p.v1Subject(subject) {
		return true
	}
	p.refused(message, ErrIdentity, id)
	return false
}

// refused counts a refused message and logs it (at most once per
// refusalLogEvery at warning level, so that a flood cannot flood the
// log).
func (p *Plane) refused(message string, err error, id uint64) {
	reason := reasonOf(err)
	p.ctr.refuse(message, reason, 1)
	p.log.Debug("engine message refused", "message", message, "worker", id, "reason", reason)
	p.warnRefusals.Do(func() {
		p.log.Warn("refusing engine messages (see kvrouter_fleet_messages_refused_total)",
			"message", message, "worker", id, "reason", reason, "err", err)
	})
}

// onCard runs on the card subscription's goroutine.
func (p *Plane) onCard(m *nats.Msg) {
	card, err := wire.DecodeCard(m.Data)
	if err != nil {
		p.ctr.malformed("card")
		p.log.Debug("malformed worker card", "err", err)
		return
	}
	if !p.fromItself(m.Subject, card.EngineId, "card") {
		return
	}
	_, _ = p.register(card, FromEngine)
}

// register records a card. A new or restarted engine's own index state is
// dropped and rebuilt by a snapshot resync of each rank; declared
// engines' index state is their event source's to rebuild.
func (p *Plane) register(card *kvrpb.WorkerCard, src Source) (Change, error) {
	change, err := p.reg.RegisterFrom(card, p.cfg.Now(), src)
	if reasonOf(err) != "" {
		p.refused("card", err, card.EngineId)
		return change, err
	}
	if err != nil {
		p.ctr.malformed("card")
		return change, err
	}
	if change == Refreshed {
		return change, nil
	}
	p.log.Info("engine registered", "worker", card.EngineId, "change", change.String(),
		"model", card.Model, "ranks", card.DpSize, "incarnation", card.Incarnation, "endpoint", redact(card.EndpointUrl))
	if src == FromEngine && p.ing != nil && (change == Added || change == Restarted) {
		p.post(item{kind: itemReset, w: routing.Worker{ID: routing.WorkerID(card.EngineId)}, n: uint64(card.DpSize)})
	}
	return change, nil
}

// redact hides the password of an endpoint URL that carries one, since
// logs must never hold a credential.
func redact(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.User == nil {
		return endpoint
	}
	return u.Redacted()
}

// onHeartbeat runs on the heartbeat subscription's goroutine, apart from
// cards, so that a flood of cards never delays the heartbeats that keep
// the real engines alive.
func (p *Plane) onHeartbeat(m *nats.Msg) {
	hb, err := wire.DecodeHeartbeat(m.Data)
	if err != nil {
		p.ctr.malformed("heartbeat")
		return
	}
	if !p.fromItself(m.Subject, hb.EngineId, "heartbeat") {
		return
	}
	_ = p.beat(hb, FromEngine)
}

// beat records a heartbeat and has the ingester check each rank's tail.
// The tail checks are offered to the applier without waiting: when its
// queue is full they are skipped (the next heartbeat repeats them), so a
// busy applier never holds heartbeats up.
func (p *Plane) beat(hb *kvrpb.Heartbeat, src Source) error {
	if err := p.reg.Heartbeat(hb, p.cfg.Now(), src); err != nil {
		if reasonOf(err) != "" {
			p.refused("heartbeat", err, hb.EngineId)
		}
		p.ctr.refusedHeartbeat()
		p.log.Debug("heartbeat refused", "worker", hb.EngineId, "err", err)
		return err
	}
	if p.ing == nil {
		return nil
	}
	for _, l := range hb.Loads {
		if l != nil {
			w := routing.Worker{ID: routing.WorkerID(hb.EngineId), Rank: l.Rank}
			p.offer(item{kind: itemTail, w: w, n: l.LastEventId})
		}
	}
	return nil
}

// onDeregister runs on the deregistration subscription's goroutine.
func (p *Plane) onDeregister(m *nats.Msg) {
	var d kvrpb.Deregister
	if err := proto.Unmarshal(m.Data, &d); err != nil || d.EngineId == 0 {
		p.ctr.malformed("deregister")
		return
	}
	if !p.fromItself(m.Subject, d.EngineId, "deregister") {
		return
	}
	id := routing.WorkerID(d.EngineId)
	if _, ok := p.reg.Deregister(id, d.Incarnation, FromEngine); ok {
		p.log.Info("engine deregistered", "worker", d.EngineId)
	} else if p.reg.declared(id) {
		p.refused("deregister", ErrDeclared, d.EngineId)
	}
}
