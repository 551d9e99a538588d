package dispatch

import (
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Binding is a session's engine; see routing.Binding.
type Binding = routing.Binding

// Bindings is the session store, whose contract policy.Bindings states:
// MemBindings for one node, the DC's Raft-replicated store for a cluster.
type Bindings = policy.Bindings

// Authoritative marks a session store that binds before dispatch; see
// policy.Authoritative.
type Authoritative = policy.Authoritative

// MemBindings is the single-node, in-memory session store.
type MemBindings = policy.MemBindings

// MemConfig configures MemBindings.
type MemConfig = policy.MemConfig

// NewMemBindings returns an empty in-memory store, or an error wrapping
// ErrInvalidConfig.
func NewMemBindings(cfg MemConfig) (*MemBindings, error) {
	b, err := policy.NewMemBindings(cfg)
	if err != nil {
		return nil, configError("%w", err)
	}
	return b, nil
}
