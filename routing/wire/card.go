package wire

import (
	"fmt"
	"net/url"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// DecodeCard parses and validates a WorkerCard payload.
func DecodeCard(data []byte) (*kvrpb.WorkerCard, error) {
	var c kvrpb.WorkerCard
	if err := proto.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return &c, ValidateCard(&c)
}

// ValidateCard checks a card's fields; the error names the first bad one.
func ValidateCard(c *kvrpb.WorkerCard) error {
	switch {
	case c.EngineId == 0:
		return malformed("card: engine_id must be non-zero")
	case c.DpSize == 0 || c.DpSize > MaxDPSize:
		return malformed("card %d: dp_size %d not in 1..%d", c.EngineId, c.DpSize, MaxDPSize)
	case c.Model == "" || len(c.Model) > MaxModelNameBytes:
		return malformed("card %d: model must be 1..%d bytes", c.EngineId, MaxModelNameBytes)
	case c.BlockSize == 0 || c.BlockSize > 1<<16:
		return malformed("card %d: block_size %d", c.EngineId, c.BlockSize)
	case c.TotalKvBlocks == 0 || c.MaxNumBatchedTokens == 0:
		return malformed("card %d: total_kv_blocks and max_num_batched_tokens must be positive", c.EngineId)
	case c.Device != kvrpb.DeviceKind_DEVICE_KIND_GPU && c.Device != kvrpb.DeviceKind_DEVICE_KIND_CPU:
		return malformed("card %d: device %d", c.EngineId, c.Device)
	case c.Checksum == "":
		return malformed("card %d: checksum must be set", c.EngineId)
	case c.BootstrapPort > 65535:
		return malformed("card %d: bootstrap_port %d is not a port", c.EngineId, c.BootstrapPort)
	case len(c.TransferDomain) > MaxModelNameBytes:
		return malformed("card %d: transfer_domain over %d bytes", c.EngineId, MaxModelNameBytes)
	}
	if _, err := routing.ParseRole(c.WorkerType); err != nil {
		return malformed("card %d: worker_type: %v", c.EngineId, err)
	}
	u, err := url.Parse(c.EndpointUrl)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return malformed("card %d: endpoint_url %q is not an http(s) URL", c.EngineId, c.EndpointUrl)
	}
	return nil
}

// Infos expands a card into the routing view of each of its ranks.
func Infos(c *kvrpb.WorkerCard) []routing.WorkerInfo {
	out := make([]routing.WorkerInfo, c.DpSize)
	role, _ := routing.ParseRole(c.WorkerType) // validated: unknown types never reach here
	for r := range out {
		out[r] = routing.WorkerInfo{
			Worker:           routing.Worker{ID: routing.WorkerID(c.EngineId), Rank: uint32(r)},
			Model:            c.Model,
			BlockSize:        int(c.BlockSize),
			TotalBlocks:      int(min(c.TotalKvBlocks, 1<<40)),
			MaxBatchedTokens: int(c.MaxNumBatchedTokens),
			Device:           routing.DeviceKind(c.Device),
			Role:             role,
			TransferDomain:   c.TransferDomain,
		}
	}
	return out
}

// DecodeHeartbeat parses and validates a Heartbeat payload.
func DecodeHeartbeat(data []byte) (*kvrpb.Heartbeat, error) {
	var h kvrpb.Heartbeat
	if err := proto.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if h.EngineId == 0 || len(h.Loads) > MaxDPSize {
		return nil, malformed("heartbeat: engine_id 0 or %d loads", len(h.Loads))
	}
	return &h, nil
}

// DecodeSnapshot parses a SnapshotReply into routing events of one worker.
// A reply carrying an error string is returned as that error.
func DecodeSnapshot(data []byte) (routing.Worker, uint64, []routing.Event, error) {
	var s kvrpb.SnapshotReply
	if err := proto.Unmarshal(data, &s); err != nil {
		return routing.Worker{}, 0, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	w := routing.Worker{ID: routing.WorkerID(s.EngineId), Rank: s.Rank}
	if s.Error != "" {
		return w, 0, nil, fmt.Errorf("snapshot of %v refused: %s", w, s.Error)
	}
	if len(s.Events) > MaxSnapshotEvents {
		return w, 0, nil, malformed("snapshot of %d events over %d", len(s.Events), MaxSnapshotEvents)
	}
	events := make([]routing.Event, len(s.Events))
	for i, pe := range s.Events {
		e, err := decodeEvent(w, pe, false)
		if err != nil {
			return w, 0, nil, err
		}
		events[i] = e
	}
	return w, s.LastEventId, events, nil
}

// Load converts a rank's engine-reported load to the routing view.
func Load(l *kvrpb.RankLoad) routing.Load {
	return routing.Load{
		PrefillTokens:  int64(min(l.ActivePrefillTokens, 1<<62)),
		DecodeBlocks:   int64(min(l.ActiveDecodeBlocks, 1<<62)),
		ActiveRequests: int64(l.Waiting) + int64(l.Running),
	}
}
