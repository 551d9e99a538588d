package server

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// ErrConfig is returned for an invalid Config; the message names the key.
var ErrConfig = errors.New("mocker server: invalid config")

// Defaults of the process wrapper.
const (
	// DefaultDC is the subject prefix token used when none is configured.
	DefaultDC = "dc1"
	// DefaultDPSize runs one rank, the common single-GPU engine.
	DefaultDPSize = 1
	// DefaultHeartbeatInterval is short enough that a router with a
	// liveness timeout of a few seconds sees several beats per timeout.
	DefaultHeartbeatInterval = 500 * time.Millisecond
	// DefaultCardInterval repeats the card so that a router started after
	// the engine learns it within seconds without a discovery protocol.
	DefaultCardInterval = 5 * time.Second
	// DefaultMaxTokens is the output length when a request names none; real
	// engines stop at an end-of-sequence token, which this one never sees.
	DefaultMaxTokens = 16
	// DefaultMaxOutputTokens caps any requested output length, so one
	// request cannot occupy a simulated engine for minutes.
	DefaultMaxOutputTokens = 4096
	// DefaultMaxBodyBytes admits a 190k-token prompt sent as a JSON integer
	// array (about 7 bytes per token) with room to spare.
	DefaultMaxBodyBytes = 16 << 20
	// DefaultKVEventsEndpoint is where the vLLM-wire mode binds its event
	// publisher: vLLM's port 5557, but on loopback, so that a test or a
	// laptop does not expose it; deployments bind tcp://*:5557.
	DefaultKVEventsEndpoint = "tcp://127.0.0.1:5557"
	// DefaultReplayEndpoint is the vLLM-wire replay socket; vLLM has none
	// by default, but a router repairs gaps with one, so the mocker offers
	// it on the next port.
	DefaultReplayEndpoint = "tcp://127.0.0.1:5558"
	// DefaultReplayBufferSteps is how many batches the replay socket keeps,
	// vLLM's buffer_steps default.
	DefaultReplayBufferSteps = 10000
	// DefaultBootstrapTimeout is SGLang's bootstrap timeout order of
	// magnitude: far longer than any prefill, short enough that a decode
	// request whose prefill never came fails while its client waits.
	DefaultBootstrapTimeout = 30 * time.Second
)

// Event protocols of Config.Protocol.
const (
	// ProtocolKVRouter publishes on kvrouter's NATS event plane.
	ProtocolKVRouter = "kvrouter"
	// ProtocolVLLM publishes as vLLM's --kv-events-config ZMQ publisher
	// does (msgpack batches, a replay socket) and uses no NATS.
	ProtocolVLLM = "vllm"
)

// Clock gives the wall-clock time that drives the engines. Tests and
// replays may inject their own; the default is time.Now.
type Clock func() time.Time

// Config shapes one mocker process. The zero value of every field means
// "use the default"; New completes and validates it.
type Config struct {
	// EngineID identifies the engine on the event plane; zero draws a
	// random non-zero id, so that several mockers need no coordination.
	EngineID uint64 `koanf:"engine_id"`
	// DC is the subject prefix token (kvr.<dc>....).
	DC string `koanf:"dc"`
	// DPSize is the number of data-parallel ranks, each its own simulated
	// engine with its own KV cache and event stream.
	DPSize int `koanf:"dp_size"`
	// EndpointURL is the OpenAI-compatible base URL advertised in the
	// card; Serve derives it from the listener address when empty.
	EndpointURL string `koanf:"endpoint_url"`
	// HeartbeatInterval is the period of Heartbeat messages.
	HeartbeatInterval time.Duration `koanf:"heartbeat_interval"`
	// CardInterval is the period at which the WorkerCard is re-published.
	CardInterval time.Duration `koanf:"card_interval"`
	// DefaultMaxTokens is the output length of a request that names none.
	DefaultMaxTokens int `koanf:"default_max_tokens"`
	// MaxOutputTokens caps the output length of any request.
	MaxOutputTokens int `koanf:"max_output_tokens"`
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// APIKey, when set, makes the /v1 endpoints require "Authorization:
	// Bearer <key>" and answer 401 otherwise, as vLLM and SGLang do when
	// started with --api-key; /health stays open.
	APIKey string `koanf:"api_key"`
	// Engine shapes every rank's simulated engine: model name, block size,
	// KV blocks, batching limits, and SpeedUp, which divides every
	// iteration time inside the engine (10 makes requests ten times
	// faster); the driver feeds the engine plain wall-clock times.
	Engine mocker.Config `koanf:"engine"`
	// Protocol is the event protocol: ProtocolKVRouter (default) or
	// ProtocolVLLM.
	Protocol string `koanf:"protocol"`
	// KVEventsEndpoint, ReplayEndpoint and KVEventsTopic shape the vLLM
	// wire mode as vLLM's --kv-events-config endpoint, replay_endpoint and
	// topic do: rank r binds each endpoint's port plus r. An empty
	// ReplayEndpoint serves no replays, like vLLM's default.
	KVEventsEndpoint string `koanf:"kv_events_endpoint"`
	ReplayEndpoint   string `koanf:"replay_endpoint"`
	KVEventsTopic    string `koanf:"kv_events_topic"`
	// ReplayBufferSteps bounds the batches kept for replay per rank.
	ReplayBufferSteps int `koanf:"replay_buffer_steps"`
	// Role is the engine's part in disaggregated serving, its card's
	// worker_type: "aggregated" (the default), "prefill" or "decode"; see
	// handoff.go for how each serves the two hops.
	Role string `koanf:"role"`
	// BootstrapPort makes a prefill engine hand off SGLang's way: it
	// serves its KV bootstrap server on this port of the HTTP listener's
	// host and declares it in its card. 0: vLLM's way (kv_transfer_params).
	BootstrapPort int `koanf:"bootstrap_port"`
	// BootstrapTimeout bounds how long a decode engine waits for the
	// prefill of its bootstrap room, and how long a prefill engine keeps a
	// room. Default DefaultBootstrapTimeout.
	BootstrapTimeout time.Duration `koanf:"bootstrap_timeout"`
	// TransferDomain is the topology domain declared in the card: routers
	// pair a prefill engine only with decode engines of its domain.
	TransferDomain string `koanf:"transfer_domain"`
	// Clock is the time source; nil means time.Now.
	Clock Clock `koanf:"-"`
	// Rand draws the engine id and the incarnation; nil means a generator
	// seeded from the operating system. Tests inject a fixed seed.
	Rand *rand.Rand `koanf:"-"`
}

// EnsureDefaults replaces every zero field with its default and returns the
// config for chaining. It draws EngineID from Rand when zero.
func (c *Config) EnsureDefaults() *Config {
	c.DC = cmp.Or(c.DC, DefaultDC)
	c.DPSize = cmp.Or(c.DPSize, DefaultDPSize)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.CardInterval = cmp.Or(c.CardInterval, DefaultCardInterval)
	c.DefaultMaxTokens = cmp.Or(c.DefaultMaxTokens, DefaultMaxTokens)
	c.MaxOutputTokens = cmp.Or(c.MaxOutputTokens, DefaultMaxOutputTokens)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.Protocol = cmp.Or(c.Protocol, ProtocolKVRouter)
	c.KVEventsEndpoint = cmp.Or(c.KVEventsEndpoint, DefaultKVEventsEndpoint)
	c.ReplayBufferSteps = cmp.Or(c.ReplayBufferSteps, DefaultReplayBufferSteps)
	c.BootstrapTimeout = cmp.Or(c.BootstrapTimeout, DefaultBootstrapTimeout)
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	for c.EngineID == 0 {
		c.EngineID = c.Rand.Uint64()
	}
	c.Engine.EnsureDefaults()
	return c
}

// Validate checks every field and names the first bad key.
func (c *Config) Validate() error {
	if err := kvrpb.ValidDC(c.DC); err != nil {
		return fmt.Errorf("%w: dc: %w", ErrConfig, err)
	}
	role, err := routing.ParseRole(c.Role)
	if err != nil {
		return fmt.Errorf("%w: role: %w", ErrConfig, err)
	}
	checks := []struct {
		key string
		bad bool
		msg string
	}{
		{"engine_id", c.EngineID == 0, "must be non-zero"},
		{"dp_size", c.DPSize < 1 || c.DPSize > wire.MaxDPSize, fmt.Sprintf("must be in 1..%d", wire.MaxDPSize)},
		{"heartbeat_interval", c.HeartbeatInterval <= 0, "must be positive"},
		{"card_interval", c.CardInterval <= 0, "must be positive"},
		{"default_max_tokens", c.DefaultMaxTokens < 1, "must be positive"},
		{"max_output_tokens", c.MaxOutputTokens < c.DefaultMaxTokens, "must be at least default_max_tokens"},
		{"max_body_bytes", c.MaxBodyBytes < 1, "must be positive"},
		{"api_key", strings.ContainsFunc(c.APIKey, func(r rune) bool { return r <= ' ' || r >= 0x7f }), "must be visible ASCII without spaces"},
		{"engine.model", len(c.Engine.Model) > wire.MaxModelNameBytes, fmt.Sprintf("must be at most %d bytes", wire.MaxModelNameBytes)},
		{"protocol", c.Protocol != ProtocolKVRouter && c.Protocol != ProtocolVLLM, "must be kvrouter or vllm"},
		{"replay_buffer_steps", c.ReplayBufferSteps < 1, "must be positive"},
		{"kv_events_endpoint", c.Protocol == ProtocolVLLM && !bindable(c.KVEventsEndpoint, c.DPSize), "must be tcp://host:port with room for a port per rank"},
		{"replay_endpoint", c.Protocol == ProtocolVLLM && c.ReplayEndpoint != "" && !bindable(c.ReplayEndpoint, c.DPSize), "must be tcp://host:port with room for a port per rank"},
		{"endpoint_url", c.EndpointURL != "" && !httpURL(c.EndpointURL), fmt.Sprintf("%q is not an http(s) URL", c.EndpointURL)},
		{"bootstrap_port", c.BootstrapPort < 0 || c.BootstrapPort > 65535, fmt.Sprintf("must be a port in 1..65535, got %d", c.BootstrapPort)},
		{"bootstrap_port", c.BootstrapPort != 0 && role != routing.RolePrefill, fmt.Sprintf("is a prefill engine's (role prefill), not a %s engine's", role)},
		{"bootstrap_timeout", c.BootstrapTimeout < 0, fmt.Sprintf("must be positive, got %v", c.BootstrapTimeout)},
		{"transfer_domain", len(c.TransferDomain) > wire.MaxModelNameBytes, fmt.Sprintf("must be at most %d bytes", wire.MaxModelNameBytes)},
	}
	for _, k := range checks {
		if k.bad {
			return fmt.Errorf("%w: %s %s", ErrConfig, k.key, k.msg)
		}
	}
	if err := c.Engine.Validate(); err != nil {
		return fmt.Errorf("%w: engine: %w", ErrConfig, err)
	}
	return nil
}

// httpURL reports whether s is an http(s) URL with a host, the form
// routers accept in a card; an empty EndpointURL is derived later.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// bindable reports whether ep is a tcp://host:port address whose port can
// be offset for each of ranks ranks, as vLLM offsets it.
func bindable(ep string, ranks int) bool {
	_, _, err := rankEndpoint(ep, uint32(max(ranks-1, 0)))
	return err == nil
}

// role is the validated Role.
func (c *Config) role() routing.Role {
	r, _ := routing.ParseRole(c.Role)
	return r
}
