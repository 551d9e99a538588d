package declared

import (
	"context"
	"encoding/json"
	"io"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// serverInfoPaths are where an SGLang server describes itself (its
// resolved server arguments): /server_info, and the older
// /get_server_info that newer servers keep as an alias.
var serverInfoPaths = []string{"/server_info", "/get_server_info"}

// serverInfo is the part of SGLang's server information that says the
// engine's role in disaggregated serving.
type serverInfo struct {
	// Mode is --disaggregation-mode: "null", "prefill" or "decode".
	Mode string `json:"disaggregation_mode"`
	// BootstrapPort is --disaggregation-bootstrap-port, the bootstrap
	// server of a prefill engine.
	BootstrapPort int `json:"disaggregation_bootstrap_port"`
}

// resolveRole reads, once, the engine's role from its own metadata when
// the declaration gives none: an SGLang server's disaggregation mode and,
// for a prefill server, its bootstrap port. An engine without that page
// (vLLM, whose connector role no endpoint reports) stays aggregated, and
// a failed read is not a failed probe: the role is optional metadata.
func (p *prober) resolveRole(ctx context.Context) {
	if p.roleKnown {
		return
	}
	p.roleKnown = true
	if p.e.Ranks[0].roleKey != "" {
		return
	}
	info, ok := p.serverInfo(ctx)
	if !ok {
		return
	}
	role := routing.RoleAggregated
	// The prober's copy: the manager compares its own with the engine's
	// next declaration.
	p.e.Ranks = slices.Clone(p.e.Ranks)
	switch info.Mode {
	case "prefill":
		role = routing.RolePrefill
	case "decode":
		role = routing.RoleDecode
	}
	for i := range p.e.Ranks {
		p.e.Ranks[i].Role = role
		if role == routing.RolePrefill && info.BootstrapPort > 0 && info.BootstrapPort <= 65535 {
			p.e.Ranks[i].BootstrapPort = uint32(info.BootstrapPort)
		}
	}
	if role != routing.RoleAggregated {
		p.cfg.Log.Info("engine declares its role", "engine", p.e.URL, "role", role.String(), "bootstrap_port", p.e.Ranks[0].BootstrapPort)
	}
}

// serverInfo reads the first server information page the engine serves.
func (p *prober) serverInfo(ctx context.Context) (serverInfo, bool) {
	for _, path := range serverInfoPaths {
		resp, err := p.get(ctx, path)
		if err != nil {
			continue
		}
		var info serverInfo
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info)
		resp.Body.Close()
		if err == nil {
			return info, true
		}
	}
	return serverInfo{}, false
}
