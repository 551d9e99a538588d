package frontend

import (
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// PolicyClassHeader names the policy class or family a client asks for.
const PolicyClassHeader = "X-Dynamo-Meta-Policy-Class"

// maxPolicyClassBytes bounds the header: class names are short
// configuration keys, and a bound keeps clients from filling logs.
const maxPolicyClassBytes = 128

// readPolicyClass returns the requested class, refusing a value that no
// configuration could name (too long, or not a plain token). A valid name
// the profile does not define is not refused: like the reference, the
// request takes the default family (and the fallback is counted).
func readPolicyClass(h http.Header) (string, error) {
	v := h.Get(PolicyClassHeader)
	if len(v) > maxPolicyClassBytes {
		return "", oaiedge.Invalid(PolicyClassHeader, "%s is over %d bytes", PolicyClassHeader, maxPolicyClassBytes)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c == '-' || c == '_' || c == '.' || c == '/' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "", oaiedge.Invalid(PolicyClassHeader, "%s must be a class or family name ([A-Za-z0-9._:/-]), got %q", PolicyClassHeader, v)
		}
	}
	return v, nil
}
