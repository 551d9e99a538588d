package routing

import (
	"errors"
	"fmt"
)

// Role is what a worker does with a request in disaggregated serving. An
// aggregated worker serves a request whole; a prefill worker computes the
// prompt's KV cache and hands it off; a decode worker receives that cache
// and generates the answer. The names are the WorkerCard's worker_type
// values.
type Role uint8

// The roles. The zero value is aggregated, the role of a worker that
// declares none.
const (
	RoleAggregated Role = iota
	RolePrefill
	RoleDecode
)

// ErrUnknownRole is wrapped by ParseRole for a name that is none of the
// roles.
var ErrUnknownRole = errors.New("unknown worker type")

// roleNames are the roles' names, indexed by Role.
var roleNames = [...]string{"aggregated", "prefill", "decode"}

// String names the role as the card's worker_type does.
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole reads a worker_type: "aggregated", "prefill" or "decode"; the
// empty string is aggregated, the default of a card that declares none.
// Anything else is refused rather than served as aggregated, since a
// misspelt decode worker would otherwise be sent whole requests.
func ParseRole(s string) (Role, error) {
	if s == "" {
		return RoleAggregated, nil
	}
	for i, n := range roleNames {
		if s == n {
			return Role(i), nil
		}
	}
	return RoleAggregated, fmt.Errorf("%w %q (known: aggregated, prefill, decode)", ErrUnknownRole, s)
}
