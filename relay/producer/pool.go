package producer

import (
	"fmt"
	"strings"
)

// HashSchemeXXH3Chain names the block hashing of routing/hash: XXH3-64 of
// each block's tokens, chained through the previous block's hash.
const HashSchemeXXH3Chain = "xxh3-chain"

// maxNameLen bounds the DC and model names so that a pool identity stays a
// small map key and a small wire field.
const maxNameLen = 256

// Domain is the cache semantics a pool's block hashes have: two pools of the
// same domain in two DCs name the same prompt prefix with the same hash, so
// one request's hashes can be searched in both.
type Domain struct {
	// Model is the served model name.
	Model string
	// BlockSize is the KV block size in tokens.
	BlockSize uint32
	// HashScheme names the block hash function (HashSchemeXXH3Chain).
	HashScheme string
	// HashSeed is the hash seed, with LoRA name and cache salt folded in.
	HashSeed uint64
}

// PoolID identifies a pool: one domain in one DC.
type PoolID struct {
	DC string
	Domain
}

// String renders the pool for logs: dc/model/block_size/scheme/seed.
func (p PoolID) String() string {
	return fmt.Sprintf("%s/%s/%d/%s/%#x", p.DC, p.Model, p.BlockSize, p.HashScheme, p.HashSeed)
}

// Validate reports a malformed identity, wrapped in ErrInvalidPool. The
// empty model is the session summary's (SessionDomain) and valid only
// with its hash scheme.
func (p PoolID) Validate() error {
	switch {
	case p.DC == "" || len(p.DC) > maxNameLen || strings.ContainsAny(p.DC, "/\x00"):
		return fmt.Errorf("%w: dc %q", ErrInvalidPool, p.DC)
	case p.Model == "" && p.Domain == SessionDomain:
		return nil
	case p.Model == "" || len(p.Model) > maxNameLen:
		return fmt.Errorf("%w: model %q", ErrInvalidPool, p.Model)
	case p.BlockSize == 0:
		return fmt.Errorf("%w: block size 0", ErrInvalidPool)
	case p.HashScheme == "" || len(p.HashScheme) > maxNameLen:
		return fmt.Errorf("%w: hash scheme %q", ErrInvalidPool, p.HashScheme)
	}
	return nil
}
