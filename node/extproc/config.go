package extproc

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("extproc: invalid config")

// DefaultDeadline bounds the picker's own work on a request. A decision
// takes tens of microseconds and a session bind through Raft a few
// milliseconds; 200 ms leaves room for a short wait in the admission
// queue while keeping a picker that stalls from holding requests.
const DefaultDeadline = 200 * time.Millisecond

// Config configures a Server. Zero fields take their defaults.
type Config struct {
	// Deadline bounds the picker's work from the end of a request's body
	// to its answer.
	Deadline time.Duration
	// BodyTimeout bounds the arrival of the body after the headers, and
	// MaxBodyBytes its size: the frontend's limits by default.
	BodyTimeout  time.Duration
	MaxBodyBytes int64
	// FailOpen answers a request the picker cannot route for a reason
	// other than the client's or an overload without a destination, so
	// that the gateway's own balancing applies, instead of an error.
	FailOpen bool
	// OverloadStatus is the status of dispatch.ErrOverloaded: 429 by
	// default, as the extension's protocol says for a request that should
	// be dropped under load. It must be a status Envoy's HttpStatus
	// defines, which rules out 529.
	OverloadStatus int
	// Serving, when set, gates every request: while it reports false the
	// picker answers 503 (or falls through under FailOpen).
	Serving func() bool
	// Now is the clock of arrivals; nil means time.Now.
	Now func() time.Time
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Deadline = cmp.Or(c.Deadline, DefaultDeadline)
	c.BodyTimeout = cmp.Or(c.BodyTimeout, oaiedge.BodyReadTimeout)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, oaiedge.MaxBodyBytes)
	c.OverloadStatus = cmp.Or(c.OverloadStatus, http.StatusTooManyRequests)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first invalid field of c (after defaults).
func (c Config) Validate() error {
	switch {
	case c.Deadline < 0 || c.BodyTimeout < 0:
		return fmt.Errorf("%w: deadline and body timeout must be positive", ErrConfig)
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("%w: max body bytes %d is negative", ErrConfig, c.MaxBodyBytes)
	case c.OverloadStatus < 400 || c.OverloadStatus > 599 || int(envoyStatus(c.OverloadStatus)) != c.OverloadStatus:
		return fmt.Errorf("%w: overload status %d is not an error status Envoy defines", ErrConfig, c.OverloadStatus)
	}
	return nil
}
