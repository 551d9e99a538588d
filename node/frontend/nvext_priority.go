package frontend

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// nvextPriority reads nvext.agent_hints.priority from a request body: the
// admission queue's priority (seconds of arrival credit under fcfs, a
// weight under wspt). Absent is 0. A value that is not a number, is
// negative or is over dispatch.MaxPriority is refused, naming the field.
// Bodies without "nvext" skip the decode.
func nvextPriority(body []byte) (float64, error) {
	if !bytes.Contains(body, []byte(`"nvext"`)) {
		return 0, nil
	}
	var doc struct {
		NVExt *struct {
			AgentHints *struct {
				Priority *json.Number `json:"priority"`
			} `json:"agent_hints"`
		} `json:"nvext"`
	}
	const param = "nvext.agent_hints.priority"
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, oaiedge.Invalid("nvext", "nvext must be an object with agent_hints an object")
	}
	if doc.NVExt == nil || doc.NVExt.AgentHints == nil || doc.NVExt.AgentHints.Priority == nil {
		return 0, nil
	}
	p, err := doc.NVExt.AgentHints.Priority.Float64()
	switch {
	case err != nil || math.IsNaN(p):
		return 0, oaiedge.Invalid(param, "%s must be a number", param)
	case p < 0:
		return 0, oaiedge.Invalid(param, "%s must be >= 0, got %v", param, p)
	case p > dispatch.MaxPriority:
		return 0, oaiedge.Invalid(param, "%s must be at most %d, got %v", param, dispatch.MaxPriority, p)
	}
	return p, nil
}
