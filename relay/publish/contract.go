package publish

import (
	"fmt"
	"math"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// Contract is the marker every message repeats: "KVR1" as a big-endian
// fixed32. A peer of another protocol family fails on the first message.
const Contract uint32 = 0x4B565231

// ProtocolVersion is the version of the message sequence this package
// speaks. Version 1 rules: fields are only added, never reused; a new
// payload format needs its own discriminator.
const ProtocolVersion uint32 = 1

// maxSubscriberID bounds the subscriber id, which only appears in logs.
const maxSubscriberID = 128

// checkContract validates the marker and version of a request or message.
func checkContract(contract, version uint32) error {
	if contract != Contract || version != ProtocolVersion {
		return fmt.Errorf("%w: contract %#08x version %d, want %#08x version %d",
			ErrContract, contract, version, Contract, ProtocolVersion)
	}
	return nil
}

// poolToProto converts a pool identity for the wire.
func poolToProto(p producer.PoolID) *kvrpb.RelayPool {
	return &kvrpb.RelayPool{Dc: p.DC, Model: p.Model, BlockSize: p.BlockSize, HashScheme: p.HashScheme, HashSeed: p.HashSeed}
}

// poolFromProto converts and validates a pool identity from the wire.
func poolFromProto(p *kvrpb.RelayPool) (producer.PoolID, error) {
	if p == nil {
		return producer.PoolID{}, fmt.Errorf("%w: no pool", ErrInvalidRequest)
	}
	id := producer.PoolID{DC: p.GetDc(), Domain: producer.Domain{
		Model: p.GetModel(), BlockSize: p.GetBlockSize(), HashScheme: p.GetHashScheme(), HashSeed: p.GetHashSeed()}}
	if err := id.Validate(); err != nil {
		return id, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return id, nil
}

// checkRequest validates a subscribe request and returns its pool.
func checkRequest(req *kvrpb.RelaySubscribeRequest) (producer.PoolID, error) {
	if err := checkContract(req.GetContract(), req.GetProtocolVersion()); err != nil {
		return producer.PoolID{}, err
	}
	if n := len(req.GetSubscriberId()); n == 0 || n > maxSubscriberID {
		return producer.PoolID{}, fmt.Errorf("%w: subscriber id of %d bytes (1..%d)", ErrInvalidRequest, n, maxSubscriberID)
	}
	return poolFromProto(req.GetPool())
}

// loadToProto converts a pool load for a heartbeat.
func loadToProto(l producer.Load) *kvrpb.RelayLoad {
	return &kvrpb.RelayLoad{Engines: uint32(min(max(l.Engines, 0), math.MaxUint32)), ActiveRequests: l.ActiveRequests,
		PrefillTokens: l.PrefillTokens, DecodeBlocks: l.DecodeBlocks, Utilization: l.Utilization}
}

// loadFromProto converts a heartbeat's load, clamping what a peer may send
// out of range.
func loadFromProto(l *kvrpb.RelayLoad) producer.Load {
	u := l.GetUtilization()
	if !(u >= 0) {
		u = 0
	}
	return producer.Load{Engines: int(l.GetEngines()), ActiveRequests: max(l.GetActiveRequests(), 0),
		PrefillTokens: max(l.GetPrefillTokens(), 0), DecodeBlocks: max(l.GetDecodeBlocks(), 0), Utilization: min(u, 1)}
}

// message wraps a body in the contract envelope.
func message() *kvrpb.RelayMessage {
	return &kvrpb.RelayMessage{Contract: Contract, ProtocolVersion: ProtocolVersion}
}
