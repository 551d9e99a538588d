package fleet

import (
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// onBatch runs on the KV subscription's goroutine: it decodes, so that
// decoding overlaps with the applier's index writes, and queues in
// arrival order.
func (p *Plane) onBatch(m *nats.Msg) {
	w, inc, events, err := wire.DecodeBatch(m.Data)
	p.post(item{kind: itemBatch, w: w, inc: inc, events: events, err: err})
}

// onWorkers runs on the registration subscription's goroutine, so cards,
// heartbeats and deregistrations are handled in arrival order.
func (p *Plane) onWorkers(m *nats.Msg) {
	switch m.Subject {
	case p.subjReg:
		p.onCard(m.Data)
	case p.subjHB:
		p.onHeartbeat(m.Data)
	case p.subjDel:
		p.onDeregister(m.Data)
	}
}

func (p *Plane) onCard(data []byte) {
	card, err := wire.DecodeCard(data)
	if err != nil {
		p.ctr.malformed("card")
		p.log.Debug("malformed worker card", "err", err)
		return
	}
	p.register(card, true)
}

// register records a card. With resync, a new or restarted engine's index
// state is dropped and rebuilt by a snapshot resync of each rank, for
// engines that answer kvrouter's snapshot requests; declared engines'
// index state is their event source's to rebuild.
func (p *Plane) register(card *kvrpb.WorkerCard, resync bool) (Change, error) {
	change, err := p.reg.Register(card, p.cfg.Now())
	if err != nil {
		p.ctr.malformed("card")
		return change, err
	}
	if change == Refreshed {
		return change, nil
	}
	p.log.Info("engine registered", "worker", card.EngineId, "change", change.String(),
		"model", card.Model, "ranks", card.DpSize, "incarnation", card.Incarnation, "endpoint", card.EndpointUrl)
	if resync && p.ing != nil && (change == Added || change == Restarted) {
		p.post(item{kind: itemReset, w: routing.Worker{ID: routing.WorkerID(card.EngineId)}, n: uint64(card.DpSize)})
	}
	return change, nil
}

func (p *Plane) onHeartbeat(data []byte) {
	hb, err := wire.DecodeHeartbeat(data)
	if err != nil {
		p.ctr.malformed("heartbeat")
		return
	}
	_ = p.beat(hb)
}

// beat records a heartbeat and has the ingester check each rank's tail.
func (p *Plane) beat(hb *kvrpb.Heartbeat) error {
	if err := p.reg.Heartbeat(hb, p.cfg.Now()); err != nil {
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
			p.post(item{kind: itemTail, w: w, n: l.LastEventId})
		}
	}
	return nil
}

func (p *Plane) onDeregister(data []byte) {
	var d kvrpb.Deregister
	if err := proto.Unmarshal(data, &d); err != nil || d.EngineId == 0 {
		p.ctr.malformed("deregister")
		return
	}
	if _, ok := p.reg.Deregister(routing.WorkerID(d.EngineId), d.Incarnation); ok {
		p.log.Info("engine deregistered", "worker", d.EngineId)
	}
}
