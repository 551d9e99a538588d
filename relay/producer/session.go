package producer

import (
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// The session summary
//
// A DC publishes, beside its block pools, the set of session keys its
// router cluster has bound: one more pool, in SessionDomain, fed from the
// session lists of the ownership change stream (Batch.Sessions). It is an
// ordinary producer whose "blocks" are session-key hashes held by one
// reserved rank, SessionOwner, so the publication protocol, the
// consumer's lanes and their staleness need nothing new: another DC asks
// its lane with the session's hash as a one-block prefix, and a depth of 1
// means "probably bound there" (a cuckoo false positive is possible, a
// false negative is not, up to the lane's staleness).

// HashSchemeSessionKey names the session summary's hashing:
// kvrpb.SessionKeyHash of the binding key (XXH3-64, seed
// kvrpb.SessionKeyHashSeed).
const HashSchemeSessionKey = "session-key-v1"

// SessionDomain is the reserved domain of the session summary: no model
// (a block pool always names one, so the two never meet), one "block" per
// session, the session-key hashing and its seed.
var SessionDomain = Domain{Model: "", BlockSize: 1, HashScheme: HashSchemeSessionKey, HashSeed: kvrpb.SessionKeyHashSeed}

// SessionOwner is the one rank that holds every entry of a session
// summary: the DC itself. Sessions have no engine in the summary, since
// other DCs need only to know that the DC has bound the key.
var SessionOwner = routing.Worker{}

// SessionPool names the session summary of dc.
func SessionPool(dc string) PoolID { return PoolID{DC: dc, Domain: SessionDomain} }

// SessionHash is the summary entry of a session binding key.
func SessionHash(key string) routing.SeqHash { return routing.SeqHash(kvrpb.SessionKeyHash(key)) }
