package dispatch

import (
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Binding is a session's engine; see routing.Binding.
type Binding = routing.Binding

// Bindings is the session store, whose contract policy.Bindings states:
// policy.MemBindings for one node, the DC's Raft-replicated store for a cluster.
type Bindings = policy.Bindings

// Authoritative marks a session store that binds before dispatch; see
// policy.Authoritative.
type Authoritative = policy.Authoritative
