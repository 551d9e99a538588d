package index

import (
	"github.com/kvrouter/kvrouter/routing"
)

var (
	w1 = routing.Worker{ID: 1}
	w2 = routing.Worker{ID: 2}
	w3 = routing.Worker{ID: 2, Rank: 1}
)

// blk builds a stored block whose engine id is engine and local hash local.
func blk(engine, local uint64) routing.StoredBlock {
	return routing.StoredBlock{Engine: routing.EngineHash(engine), Local: routing.LocalHash(local)}
}

// stored builds a stored event without a parent.
func stored(w routing.Worker, id uint64, tier routing.Tier, blocks ...routing.StoredBlock) routing.Event {
	return routing.Event{Worker: w, ID: id, Kind: routing.EventStored, Tier: tier, Blocks: blocks}
}

// child builds a stored event whose first block follows parent.
func child(w routing.Worker, id uint64, tier routing.Tier, parent uint64, blocks ...routing.StoredBlock) routing.Event {
	ev := stored(w, id, tier, blocks...)
	ev.Parent, ev.HasParent = routing.EngineHash(parent), true
	return ev
}

// removed builds a removed event.
func removed(w routing.Worker, id uint64, tier routing.Tier, engines ...uint64) routing.Event {
	ev := routing.Event{Worker: w, ID: id, Kind: routing.EventRemoved, Tier: tier}
	for _, e := range engines {
		ev.Removed = append(ev.Removed, routing.EngineHash(e))
	}
	return ev
}

// cleared builds a cleared event.
func cleared(w routing.Worker, id uint64) routing.Event {
	return routing.Event{Worker: w, ID: id, Kind: routing.EventCleared}
}

// seqs returns the sequence hashes of a chain of local hashes.
func seqs(locals ...uint64) []routing.SeqHash {
	ls := make([]routing.LocalHash, len(locals))
	for i, l := range locals {
		ls[i] = routing.LocalHash(l)
	}
	return routing.SeqHashes(nil, ls)
}

// match builds an expected match.
func match(w routing.Worker, device, host, disk int32) routing.Match {
	return routing.Match{Worker: w, Overlap: routing.Overlap{Device: device, Host: host, Disk: disk}}
}
