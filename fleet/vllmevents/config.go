package vllmevents

import (
	"fmt"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// Defaults of Config.
const (
	// DefaultIdleTimeout is how long a connection may stay silent before
	// the subscriber reconnects and asks for a replay. An idle engine
	// publishes nothing, so this is not a failure, only a cheap check that
	// a dropped subscription (a SUB socket may not resubscribe after the
	// publisher restarts) does not go unnoticed for long.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultReplayTimeout bounds one replay: dialing the engine's ROUTER
	// socket and reading every batch until the end marker. vLLM keeps
	// 10000 batches by default, a few megabytes on loopback or a LAN.
	DefaultReplayTimeout = 10 * time.Second
	// DefaultRetry is the pause before reconnecting after a failure.
	DefaultRetry = 500 * time.Millisecond
	// DefaultMaxPayloadBytes bounds one batch. vLLM batches one scheduler
	// step, which stores at most max_num_batched_tokens tokens' blocks:
	// well under a megabyte; the margin covers long-context prefills.
	DefaultMaxPayloadBytes = 64 << 20
)

// Config declares one engine rank's publisher.
type Config struct {
	// Worker is the engine id and data-parallel rank the events belong to.
	Worker routing.Worker
	// Endpoint is the engine's PUB address, dialled: tcp://host:port (vLLM
	// binds tcp://*:5557 by default, plus the rank for rank > 0).
	Endpoint string
	// ReplayEndpoint is the engine's ROUTER replay address, or empty when
	// the engine has none (then a gap clears the worker).
	ReplayEndpoint string
	// Topic is the engine's topic ("" by default in vLLM and SGLang).
	Topic string
	// BlockSize is the declared KV block size in tokens (vLLM's
	// --block-size, SGLang's --page-size); events of another size are
	// refused.
	BlockSize int
	// IdleTimeout, ReplayTimeout, Retry and MaxPayloadBytes: see the
	// defaults.
	IdleTimeout     time.Duration
	ReplayTimeout   time.Duration
	Retry           time.Duration
	MaxPayloadBytes int
}

// EnsureDefaults fills zero fields and returns c.
func (c *Config) EnsureDefaults() *Config {
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ReplayTimeout == 0 {
		c.ReplayTimeout = DefaultReplayTimeout
	}
	if c.Retry == 0 {
		c.Retry = DefaultRetry
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	return c
}

// Validate checks the fields and names the first bad one.
func (c *Config) Validate() error {
	if err := validEndpoint(c.Endpoint); err != nil {
		return fmt.Errorf("%w: endpoint: %w", ErrConfig, err)
	}
	if c.ReplayEndpoint != "" {
		if err := validEndpoint(c.ReplayEndpoint); err != nil {
			return fmt.Errorf("%w: replay endpoint: %w", ErrConfig, err)
		}
	}
	switch {
	case c.BlockSize <= 0:
		return fmt.Errorf("%w: block size %d must be positive", ErrConfig, c.BlockSize)
	case c.IdleTimeout <= 0, c.ReplayTimeout <= 0, c.Retry <= 0:
		return fmt.Errorf("%w: timeouts must be positive", ErrConfig)
	case c.MaxPayloadBytes <= 0:
		return fmt.Errorf("%w: max payload bytes must be positive", ErrConfig)
	}
	return nil
}

// validEndpoint accepts what the subscriber can dial: tcp://host:port or
// ipc://path. A wildcard host is what the engine binds, not an address.
func validEndpoint(ep string) error {
	switch {
	case strings.HasPrefix(ep, "ipc://") && len(ep) > len("ipc://"):
		return nil
	case !strings.HasPrefix(ep, "tcp://"):
		return fmt.Errorf("%q is not tcp://host:port or ipc://path", ep)
	case strings.Contains(ep, "*"):
		return fmt.Errorf("%q has a wildcard host; name the engine's host", ep)
	case !strings.Contains(ep[len("tcp://"):], ":"):
		return fmt.Errorf("%q has no port", ep)
	}
	return nil
}
