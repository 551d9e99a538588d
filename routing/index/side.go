package index

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// NewSide returns a predict-on-route side index: a TTL approximate index
// (DefaultSideTTL: 5 s) that records each routing decision while the
// exact index waits for the engine's KV events. Its matches are combined
// with the exact index's by MergeDevice. The exact index is never fed
// predictions, because a prediction carries no engine block ids and could
// not be removed by the events that follow. Zero fields of cfg take the
// side defaults; cfg.Policy must be PolicyTTL.
func NewSide(cfg ApproxConfig) (*Approx, error) {
	if cfg.Policy != PolicyTTL {
		return nil, fmt.Errorf("%w: ApproxConfig.Policy: the side index is TTL-only, got %v", ErrConfig, cfg.Policy)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultSideTTL
	}
	return NewApprox(cfg)
}

// MergeDevice appends to dst the per-worker combination of primary (exact
// index) and side (side index) matches, both sorted by worker as
// FindMatches returns them; the result is sorted too. The device depth is
// the larger of the two. The primary's host and disk runs keep the blocks
// they covered beyond the new device depth, so the three depths stay
// disjoint and consecutive: a side prediction can only move blocks from a
// lower tier to the device, never count one twice.
func MergeDevice(dst, primary, side []routing.Match) []routing.Match {
	i, j := 0, 0
	for i < len(primary) || j < len(side) {
		switch {
		case j == len(side) || (i < len(primary) && primary[i].Worker.Compare(side[j].Worker) < 0):
			dst = append(dst, primary[i])
			i++
		case i == len(primary) || primary[i].Worker.Compare(side[j].Worker) > 0:
			dst = append(dst, routing.Match{Worker: side[j].Worker, Overlap: routing.Overlap{Device: side[j].Device}})
			j++
		default:
			dst = append(dst, routing.Match{Worker: primary[i].Worker, Overlap: raise(primary[i].Overlap, side[j].Device)})
			i++
			j++
		}
	}
	return dst
}

// raise lifts the device depth of o to at least dev, trimming the host and
// disk runs to what lies beyond it.
func raise(o routing.Overlap, dev int32) routing.Overlap {
	if dev <= o.Device {
		return o
	}
	hostEnd := o.Device + o.Host
	diskEnd := hostEnd + o.Disk
	return routing.Overlap{
		Device: dev,
		Host:   max(0, hostEnd-dev),
		Disk:   max(0, diskEnd-max(dev, hostEnd)),
	}
}
