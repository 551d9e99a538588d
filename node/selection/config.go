package selection

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("selection: invalid config")

// Defaults of Config, each with its reason.
const (
	// DefaultReservationTTL is the load tracker's own bound on a request
	// whose end never arrived (load.DefaultMaxRequestAge): past it the
	// booking is freed anyway, so a longer reservation would hold nothing.
	DefaultReservationTTL = 5 * time.Minute
	// DefaultMaxReservations bounds outstanding reservations; each is a
	// booking of a few hundred bytes plus a timer.
	DefaultMaxReservations = 65536
	// DefaultSelectionTTL is how long a selection waits for its Reserve,
	// the reference selection service's pending-selection lifetime.
	DefaultSelectionTTL = 120 * time.Second
	// DefaultMaxSelections and DefaultMaxSelectionBytes bound the kept
	// selections, which hold their prompt's token ids (48 KiB for 12,288
	// tokens): at 1,000 selections a second the bytes bound, not the TTL,
	// decides how long one is kept.
	DefaultMaxSelections     = 4096
	DefaultMaxSelectionBytes = 64 << 20
)

// Config configures a Service. Zero fields take their defaults.
type Config struct {
	// ReservationTTL frees a reservation never released after it.
	ReservationTTL time.Duration
	// MaxReservations bounds outstanding reservations; beyond it a
	// reservation is refused (429 / RESOURCE_EXHAUSTED).
	MaxReservations int
	// SelectionTTL, MaxSelections and MaxSelectionBytes bound the
	// selections kept for Reserve.
	SelectionTTL      time.Duration
	MaxSelections     int
	MaxSelectionBytes int64
	// OverloadStatus is the HTTP status of dispatch.ErrOverloaded, the
	// frontend's (529 by default).
	OverloadStatus int
	// Serving, when set, gates every call: while it reports false the
	// service answers 503 / UNAVAILABLE (a cluster member that has not
	// caught up).
	Serving func() bool
	// Now is the clock of request arrivals and selection expiry; nil
	// means time.Now.
	Now func() time.Time
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.ReservationTTL = cmp.Or(c.ReservationTTL, DefaultReservationTTL)
	c.MaxReservations = cmp.Or(c.MaxReservations, DefaultMaxReservations)
	c.SelectionTTL = cmp.Or(c.SelectionTTL, DefaultSelectionTTL)
	c.MaxSelections = cmp.Or(c.MaxSelections, DefaultMaxSelections)
	c.MaxSelectionBytes = cmp.Or(c.MaxSelectionBytes, DefaultMaxSelectionBytes)
	c.OverloadStatus = cmp.Or(c.OverloadStatus, 529)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first invalid field of c (after defaults).
func (c Config) Validate() error {
	switch {
	case c.ReservationTTL < 0 || c.SelectionTTL < 0:
		return fmt.Errorf("%w: reservation and selection TTLs must be positive", ErrConfig)
	case c.MaxReservations < 0 || c.MaxSelections < 0 || c.MaxSelectionBytes < 0:
		return fmt.Errorf("%w: reservation and selection bounds must be positive", ErrConfig)
	case c.OverloadStatus < 400 || c.OverloadStatus > 599:
		return fmt.Errorf("%w: overload status %d is not an error status", ErrConfig, c.OverloadStatus)
	}
	return nil
}
