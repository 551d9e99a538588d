package oaiedge

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Errors of the edge's access control. Their classes are in authRows.
var (
	// ErrUnauthenticated: the request carries no credential, or one that
	// matches none configured (401).
	ErrUnauthenticated = errors.New("oaiedge: unauthenticated")
	// ErrForbidden: the request's credential is valid but does not grant
	// the route, or the route is closed on this listener (403).
	ErrForbidden = errors.New("oaiedge: forbidden")
	// ErrKeys reports an unusable key or key file at configuration time.
	ErrKeys = errors.New("oaiedge: invalid API keys")
)

// authRows are the classes of the access refusals, in OpenAI's shape for
// a missing or wrong key.
var authRows = []Row{
	Entry(ErrUnauthenticated, http.StatusUnauthorized, "authentication_error", "invalid_api_key"),
	Entry(ErrForbidden, http.StatusForbidden, "permission_error", "forbidden"),
}

// MinKeyBytes is the shortest key accepted: 16 bytes keep a key out of
// reach of guessing at any request rate an edge can serve.
const MinKeyBytes = 16

// Keys is a set of bearer credentials. Only their SHA-256 digests are
// kept, and a presented credential is compared with every one of them in
// constant time, so neither the time of a refusal nor a heap dump tells
// anything about a key. The zero Keys holds none.
type Keys struct {
	sums [][sha256.Size]byte
}

// NewKeys returns the set of keys, refusing one shorter than MinKeyBytes
// or holding a character a header cannot carry. Messages never quote a
// key, since they may be logged.
func NewKeys(keys ...string) (Keys, error) {
	var k Keys
	for i, key := range keys {
		if len(key) < MinKeyBytes {
			return Keys{}, fmt.Errorf("%w: key %d is shorter than %d bytes", ErrKeys, i+1, MinKeyBytes)
		}
		if !Visible(key) {
			return Keys{}, fmt.Errorf("%w: key %d holds a space or a non-printable character", ErrKeys, i+1)
		}
		k.sums = append(k.sums, sha256.Sum256([]byte(key)))
	}
	return k, nil
}

// Visible reports whether s is visible ASCII only (no space, no control
// character), so that it can neither split nor end a header line.
func Visible(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// ReadKeyFile reads keys from a file, one per line; blank lines and lines
// starting with # are skipped, surrounding spaces trimmed.
func ReadKeyFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeys, err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKeys, path, err)
	}
	return keys, nil
}

// Len is the number of keys.
func (k Keys) Len() int { return len(k.sums) }

// Match reports whether cred is one of the keys. It compares the digest
// of cred with every key's, without stopping at a match.
func (k Keys) Match(cred string) bool {
	if cred == "" {
		return false
	}
	sum := sha256.Sum256([]byte(cred))
	found := 0
	for i := range k.sums {
		found |= subtle.ConstantTimeCompare(sum[:], k.sums[i][:])
	}
	return found == 1
}

// BearerToken returns the credential of an "Authorization: Bearer"
// header (the scheme is case-insensitive), "" without one.
func BearerToken(h http.Header) string {
	v := h.Get("Authorization")
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return ""
	}
	return strings.TrimSpace(v[7:])
}
